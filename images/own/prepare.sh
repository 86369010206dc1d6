#!/bin/sh
# Build time, in our layer over an image of yours: install what the driver needs when the image
# lacks it (python3 and bash, and git when the root is to be committed), with the image's own
# package manager; then write the reset's configuration. One line says what is missing otherwise.
set -eu
need=""
command -v python3 >/dev/null 2>&1 || need="$need python3"
command -v bash >/dev/null 2>&1 || need="$need bash"
if [ "${COMMIT_ROOT:-0}" = 1 ]; then command -v git >/dev/null 2>&1 || need="$need git"; fi
if [ -n "$need" ]; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >/dev/null
        rm -rf /var/lib/apt/lists/*
    elif command -v apk >/dev/null 2>&1; then
        apk add --no-cache $need >/dev/null
    else
        echo "intercode: the image lacks$need, which the driver needs, and has no apt-get or apk to install it" >&2
        exit 1
    fi
fi
mkdir -p /etc/intercode
[ -f /etc/intercode/reset.json ] || echo '{"system": []}' > /etc/intercode/reset.json
if [ "${COMMIT_ROOT:-0}" = 1 ]; then sh /usr/lib/intercode/commit-root.sh; fi
