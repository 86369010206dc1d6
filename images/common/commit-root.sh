#!/bin/sh
# Commit the whole root to git, exactly as the original benchmark's images did: the reward diffs an
# agent's container against the gold one with `git status --short` at /. The .gitignore is the
# original's, byte for byte. Our pristine copy is kept out through .git/info/exclude instead, so the
# .gitignore an agent can read stays the original's.
set -eu
cd /
printf '%s' '# Folders
bin
boot
dev
etc
home
lib
media
opt
proc
root
run
sbin
srv
sys
usr
var

# Files
.dockerenv' > /.gitignore
git config --global user.email "intercode@pnlp.org"
git config --global user.name "intercode"
git init --quiet
git add -A
git commit --quiet -m 'initial commit'
# The original reset every container with `git reset --hard; git clean -fd` before each episode,
# which deletes untracked empty directories (even /tmp: its recorded runs show "tar: /tmp: Cannot
# open"). Episodes therefore always started without them; so do ours.
git clean -fdq
