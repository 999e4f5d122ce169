#!/usr/bin/env bash
# Installs Debian's PostgreSQL server for the tests that need a real
# database (internal/store/storetest starts a throwaway server per test
# process: initdb + postgres in a temp dir, on a loopback port). Does
# nothing when a server is already installed. Needs root, or sudo without a
# password. No cluster is created or started: the tests make their own.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1; then
	echo "install-postgres: a PostgreSQL server is already installed"
	exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "install-postgres: need root (or passwordless sudo) to apt-get install postgresql" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-postgres: no apt-get here; install PostgreSQL yourself and set NANOHOST_PG_BIN to its bin directory" >&2
	exit 1
fi

# Debian's package would create and start a "main" cluster on port 5432;
# the tests need none of it.
"${sudo[@]}" mkdir -p /etc/postgresql-common/createcluster.d
echo "create_main_cluster = false" | "${sudo[@]}" tee /etc/postgresql-common/createcluster.d/nanohost-tests.conf >/dev/null
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq postgresql >/dev/null
echo "install-postgres: installed $(compgen -G '/usr/lib/postgresql/*/bin/initdb' | tail -1)"
