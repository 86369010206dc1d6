#!/bin/sh
# Build time, for a Bash task set over a Dockerfile of yours (the Bash reward diffs the root with git):
# git with the image's own package manager when it lacks it, then the root committed. One line says
# what is missing otherwise.
set -eu
if ! command -v git >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq 2>&1 | grep '^[EW]:' >&2 || true
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git >/dev/null
        rm -rf /var/lib/apt/lists/*
    elif command -v apk >/dev/null 2>&1; then
        apk add --no-cache git >/dev/null
    else
        echo "intercode: the Bash reward needs git in the image, which has neither git nor apt-get or apk to install it" >&2
        exit 1
    fi
fi
sh /usr/lib/intercode/commit-root.sh
