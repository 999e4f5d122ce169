#!/usr/bin/env bash
# Build nanohost for a terminal and a host:
#
#   scripts/build.sh [OUTDIR]        # default bin/
#
# OUTDIR/nanohost-full is the whole program (`go build ./cmd/nanohost`);
# OUTDIR/nanohost is the lean front (`-tags lean`, cmd/nanohost/lean.go): it
# does --help, `pipeline validate` and `pipeline parse` itself, linking none of
# what only serve, run and runs need, so it starts like a small Go program
# (a pre-commit hook validating 30 pipelines pays 30 start-ups), and hands
# every other command to nanohost-full beside it. Keep the two together.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-bin}"
mkdir -p "$out"
go build -o "$out/nanohost-full" ./cmd/nanohost
go build -tags lean -o "$out/nanohost" ./cmd/nanohost
ls -l "$out/nanohost" "$out/nanohost-full" >&2
