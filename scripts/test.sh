#!/usr/bin/env bash
# The test command (README "Quick start", and what CI runs): vet, then every
# test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -race -count=1 ./...
