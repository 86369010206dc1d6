#!/usr/bin/env bash
# Make sure a Docker engine answers, starting one if we can.
#
# Quiet and quick when `docker info` already answers (DOCKER_HOST is respected). Otherwise, as root
# on Debian/Ubuntu: install docker.io if needed, start dockerd in the background, and poll until it
# answers. Elsewhere it says what to do. As root on Debian/Ubuntu it also installs debootstrap,
# which making the base image (debian:bookworm-slim) needs when no registry can provide it.
# Exit status: 0 when an engine answers, 1 otherwise (with one line on stderr saying why).
set -euo pipefail

LOG=/var/log/intercode-dockerd.log
WAIT_SECONDS=${INTERCODE_ENGINE_WAIT:-90}
PIDFILE=/var/run/docker.pid

say() { echo "ensure-engine: $*" >&2; }
die() { say "$*"; exit 1; }
engine_answers() { docker info >/dev/null 2>&1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
is_debian() { [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; }

apt_updated=0
apt_install() {
    if [ "$apt_updated" -eq 0 ]; then
        apt-get update -qq >/dev/null || die "apt-get update failed; check the apt sources and the network"
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
        || die "apt-get install $* failed; run it by hand to see why"
}

dockerd_running() {
    [ -r "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

start_dockerd() {
    if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
        say "starting docker.service"
        systemctl start docker.service || die "systemctl start docker failed; see: journalctl -u docker"
        return
    fi
    say "starting dockerd in the background (log: $LOG)"
    # setsid: the engine must outlive this script and not receive the caller's Ctrl-C.
    setsid nohup dockerd >>"$LOG" 2>&1 </dev/null &
    dockerd_pid=$!
}

dockerd_pid=
wait_for_engine() {
    local deadline=$((SECONDS + WAIT_SECONDS))
    until engine_answers; do
        if [ -n "$dockerd_pid" ] && ! kill -0 "$dockerd_pid" 2>/dev/null; then
            die "dockerd exited during start-up; see $LOG (inside a container, dockerd needs --privileged)"
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            die "dockerd did not answer within ${WAIT_SECONDS} s; see $LOG (inside a container, dockerd needs --privileged)"
        fi
        sleep 0.5
    done
}

if is_root && is_debian && ! command -v debootstrap >/dev/null 2>&1; then
    apt_install debootstrap
fi

engine_answers && exit 0

if [ -n "${DOCKER_HOST:-}" ]; then
    die "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST; start it, or unset DOCKER_HOST to use a local one"
fi
if [ -S /var/run/docker.sock ] && ! [ -w /var/run/docker.sock ]; then
    die "no permission on /var/run/docker.sock; join the docker group (then log in again) or run as root"
fi
if ! is_root || ! is_debian; then
    die "no Docker engine answers; start one (e.g. 'sudo systemctl start docker'), run this script as root on Debian/Ubuntu, or set DOCKER_HOST"
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    say "installing docker.io"
    apt_install docker.io
fi
if dockerd_running; then
    say "dockerd is running but does not answer yet; waiting"
else
    start_dockerd
fi
wait_for_engine
