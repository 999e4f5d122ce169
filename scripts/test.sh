#!/usr/bin/env bash
# The test command (README "Quick start", and what CI runs): vet, build the
# offline agent test image once, then every test with the race detector.
# Docker-backed, browser and PostgreSQL tests skip (loudly) when no Docker
# engine, Chromium or PostgreSQL server is available, unless
# NANOHOST_REQUIRE_DOCKER=1 / NANOHOST_REQUIRE_BROWSER=1 /
# NANOHOST_REQUIRE_POSTGRES=1 (set by .ci/run) turn that into a failure.
# The Kubernetes runtime's cluster tests run when the test cluster is up
# (scripts/kube-test-cluster.sh up; NANOHOST_REQUIRE_KUBERNETES=1 in CI).
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
if docker info >/dev/null 2>&1; then
	./scripts/test-image.sh
else
	# go test hides a passing package's output, skip messages included.
	echo "test.sh: NO DOCKER ENGINE — the agent-container tests will SKIP (CI fails instead: NANOHOST_REQUIRE_DOCKER=1)" >&2
fi
# The dashboard's browser test drives Debian's chromium; install it when we can.
./scripts/install-chromium.sh || echo "test.sh: no Chromium — the browser test will skip (CI requires it)" >&2
# The PostgreSQL store's tests start throwaway servers from Debian's postgresql.
./scripts/install-postgres.sh || echo "test.sh: no PostgreSQL — its tests will skip (CI requires it)" >&2
go test -race -count=1 -timeout 20m ./...
