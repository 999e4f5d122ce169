#!/usr/bin/env bash
# Installs Debian's chromium for the dashboard's browser test
# (internal/web, TestBrowserWatchesARunAndAnswersItsGate). Does nothing when
# a Chromium is already on PATH. Needs root, or sudo without a password.
set -euo pipefail

for name in chromium chromium-browser google-chrome headless-shell; do
	if command -v "$name" >/dev/null 2>&1; then
		echo "install-chromium: $(command -v "$name") is already installed"
		exit 0
	fi
done

if [ "$(id -u)" -eq 0 ]; then
	sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
	sudo=(sudo -n)
else
	echo "install-chromium: need root (or passwordless sudo) to apt-get install chromium" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-chromium: no apt-get here; install Chromium yourself and set NANOHOST_CHROMIUM to its path" >&2
	exit 1
fi

"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq chromium >/dev/null
echo "install-chromium: installed $(command -v chromium)"
