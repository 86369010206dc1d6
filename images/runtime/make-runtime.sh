#!/bin/sh
# Gather python3.11, bash and tmux, Python's standard library and every shared library they (and Python's
# extension modules) load into one folder, then point the binaries at that folder's loader and
# libraries. Test suites, IDLE, Tk and the like are left out: the driver needs the standard library.
set -eu
out=$1
mkdir -p "$out/bin" "$out/lib"
cp /usr/bin/python3.11 "$out/bin/python3"
cp /bin/bash "$out/bin/bash"
cp /usr/bin/tmux "$out/bin/tmux"
cp -r /usr/lib/python3.11 "$out/lib/python3.11"
cd "$out/lib/python3.11"
rm -rf test idlelib tkinter turtledemo turtle.py ensurepip lib2to3 pydoc_data unittest/test ctypes/test \
       sqlite3/test distutils/tests config-3.11-x86_64-linux-gnu site-packages dist-packages
find . -name __pycache__ -prune -exec rm -rf {} +
cd /
{
    ldd "$out/bin/python3"
    ldd "$out/bin/bash"
    ldd "$out/bin/tmux"
    for module in "$out"/lib/python3.11/lib-dynload/*.so; do ldd "$module"; done
} | awk '/=> \// { print $3 } $1 ~ /ld-linux/ { print $1 }' | sort -u | while read -r library; do
    cp -L "$library" "$out/lib/"
done
loader=$(basename "$(patchelf --print-interpreter "$out/bin/python3")")
for binary in "$out/bin/python3" "$out/bin/bash" "$out/bin/tmux"; do
    # RPATH (not RUNPATH): it applies to the libraries the extension modules load too
    patchelf --set-interpreter "$out/lib/$loader" --force-rpath --set-rpath "$out/lib" "$binary"
done
"$out/bin/python3" -I -c 'import json, ssl, select, tarfile, zipfile, hashlib, subprocess'
"$out/bin/bash" -c 'true'
"$out/bin/tmux" -V
