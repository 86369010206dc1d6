#!/usr/bin/env bash
# Make sure a headless-capable Chromium is installed (the report's browser test renders report.html in it).
#
# Quiet and quick when `chromium` is already on PATH. Otherwise, as root on Debian/Ubuntu: install
# Debian's `chromium` package. Elsewhere it says what to do.
# Exit status: 0 when `chromium` runs, 1 otherwise (with one line on stderr saying why).
set -euo pipefail

say() { echo "ensure-chromium: $*" >&2; }
die() { say "$*"; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
is_debian() { [ -r /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; }
chromium_runs() { command -v chromium >/dev/null 2>&1 && chromium --version >/dev/null 2>&1; }

chromium_runs && exit 0

if ! is_root || ! is_debian; then
    die "chromium is missing; install it (Debian/Ubuntu: 'sudo apt-get install chromium') or run this script as root"
fi
say "installing chromium"
apt-get update -qq >/dev/null || die "apt-get update failed; check the apt sources and the network"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null \
    || die "apt-get install chromium failed; run it by hand to see why"
chromium_runs || die "chromium was installed but does not run; try 'chromium --version' to see why"
