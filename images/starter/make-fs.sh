#!/bin/sh
# The starter file system: /starter for the Bash tasks, /ctf/<id> for three small CTF challenges.
# Timestamps are fixed so that gold outputs never depend on the build date.
set -eu
mkdir -p /starter/logs /starter/src/lib /starter/data /starter/notes /starter/empty
printf '%s\n' "2024-01-02 10:00:01 INFO start" "2024-01-02 10:00:05 ERROR disk full" \
    "2024-01-02 10:01:00 WARN retry" "2024-01-02 10:02:13 ERROR timeout" "2024-01-02 10:03:00 INFO done" \
    > /starter/logs/app.log
printf '%s\n' "2024-01-01 09:00:00 INFO boot" > /starter/logs/old.log
printf 'import lib.util\n\nprint(lib.util.double(21))\n' > /starter/src/main.py
printf 'def double(x):\n    return 2 * x\n' > /starter/src/lib/util.py
: > /starter/src/lib/__init__.py
printf 'id,name,score\n1,ada,91\n2,grace,88\n3,linus,75\n' > /starter/data/scores.csv
printf 'id,city\n1,London\n2,New York\n' > /starter/data/cities.csv
printf 'buy milk\nfix the build\n' > /starter/notes/todo.txt
: > /starter/notes/blank.txt

# CTF 1: the flag, base64-encoded.
mkdir -p /ctf/s1 /ctf/s2 /ctf/s3
printf 'starter{base64_is_not_encryption}' | base64 > /ctf/s1/message.txt
# CTF 2: XOR with a one-byte key that the script holds.
cat > /ctf/s2/encrypt.py <<'PY'
import sys
KEY = 0x2A
data = sys.stdin.buffer.read()
sys.stdout.buffer.write(bytes(b ^ KEY for b in data))
PY
printf 'starter{xor_with_one_byte}' | python3 /ctf/s2/encrypt.py > /ctf/s2/flag.enc
# CTF 3: a flag in a gzip file inside a tar archive with a misleading name.
mkdir -p /tmp/s3/inner
printf 'not here\n' > /tmp/s3/readme.txt
printf 'starter{archives_all_the_way_down}\n' | gzip -n > /tmp/s3/inner/data.bin
tar -C /tmp/s3 --mtime=2024-01-01 --owner=0 --group=0 -cf /ctf/s3/photos.jpg readme.txt inner
rm -rf /tmp/s3

find /starter /ctf -exec touch -h -d '2024-01-02 12:00:00' {} +
