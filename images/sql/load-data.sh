#!/bin/sh
# Build time only: initialise MariaDB's data directory under our config, load the benchmark's
# dumps, add the `intercode` user, and shut the server down cleanly so the layer holds a consistent
# data directory. Usage: load-data.sh DIR; every DIR/*.sql is loaded, in name order (the SQL image
# gives spider.sql and wikisql.sql, the starter image its own starter.sql).
set -eu
data=$1

# Initialise under our config (the Dockerfile removed the package's data directory; this makes sure).
find /var/lib/mysql -mindepth 1 -delete
install -d -o mysql -g mysql /run/mysqld
mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >/dev/null

# Grow the system tablespace in small steps: the default 64 MB step would add 64 MB to the image
# for the few kB the load needs there.
mariadbd --user=mysql --skip-networking --innodb-autoextend-increment=1 &
server=$!
tries=0
until mariadb-admin --silent ping >/dev/null 2>&1; do
    kill -0 "$server" 2>/dev/null || { echo "load-data: mariadbd exited during start-up" >&2; exit 1; }
    tries=$((tries + 1))
    [ "$tries" -le 240 ] || { echo "load-data: mariadbd not ready after 60 s" >&2; exit 1; }
    sleep 0.25
done

# Spider's and WikiSQL's dumps both create the user admin@%: IF NOT EXISTS lets the second one load.
loaded=0
for dump in "$data"/*.sql; do
    [ -f "$dump" ] || continue
    echo "load-data: loading $(basename "$dump")"
    sed 's/^CREATE USER /CREATE USER IF NOT EXISTS /' "$dump" | mariadb
    loaded=$((loaded + 1))
done
[ "$loaded" -gt 0 ] || { echo "load-data: no .sql dump in $data" >&2; exit 1; }
mariadb -e "CREATE USER 'intercode'@'%' IDENTIFIED BY 'intercode';
            GRANT ALL PRIVILEGES ON *.* TO 'intercode'@'%';"
mariadb -N -e "SELECT concat('load-data: ', count(*), ' databases') FROM information_schema.schemata"

# A slow shutdown finishes purge and merges now, so containers don't start with background writes.
mariadb -e "SET GLOBAL innodb_fast_shutdown = 0"
mariadb-admin shutdown
wait "$server"
