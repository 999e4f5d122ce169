#!/usr/bin/env bash
# Quick start: build nanohost, make sure there is an agent image, and start
# the host with the console chat on this terminal.
#
#   scripts/serve.sh [--config FILE]
#
# With nanohost-agent:latest present (the Claude Code image, built from the
# Dockerfile) agents are Claude Code. Without it, the offline test image
# nanohost-agent:test is built and agents answer from the demo script
# examples/demo.script.json, so everything works with no API key.
#
# On the embedded defaults (no --config, no nanohost.yaml) the console is the
# chat, so the host's own logs are kept to warnings;
# NANOHOST_LOG_LEVEL=info scripts/serve.sh shows everything it does.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "serve: building bin/nanohost and bin/nanohost-full …" >&2
# The pair (scripts/build.sh): bin/nanohost, the lean front for the terminal's
# quick commands, hands everything else to bin/nanohost-full beside it.
scripts/build.sh bin 2>/dev/null

if docker image inspect nanohost-agent:latest >/dev/null 2>&1; then
	export NANOHOST_IMAGE="${NANOHOST_IMAGE:-nanohost-agent:latest}"
	export NANOHOST_AGENT="${NANOHOST_AGENT:-claude}"
	echo "serve: agents are Claude Code (image nanohost-agent:latest)." >&2
else
	scripts/test-image.sh nanohost-agent:test
	export NANOHOST_IMAGE="${NANOHOST_IMAGE:-nanohost-agent:test}"
	export NANOHOST_AGENT="${NANOHOST_AGENT:-script}"
	export NANOHOST_AGENT_SCRIPT="${NANOHOST_AGENT_SCRIPT:-examples/demo.script.json}"
	cat >&2 <<'MSG'
serve: demo mode — agents answer from examples/demo.script.json (no API key needed).
       To use Claude Code instead: build the agent image (docker build -t nanohost-agent:latest .),
       put ANTHROPIC_API_KEY=... (or CLAUDE_CODE_OAUTH_TOKEN=...) in .env, and run this script again.
MSG
fi
cat >&2 <<'MSG'
serve: type a message to talk to the agent; `/pipeline run demo` runs examples/demo.dot;
       answer its gate by typing the key (A or R); Ctrl-C stops (runs go on at the next start).
MSG
if [[ $# -eq 0 && ! -f nanohost.yaml ]]; then
	# On the embedded defaults the console is the chat: keep the log quiet.
	export NANOHOST_LOG_LEVEL="${NANOHOST_LOG_LEVEL:-warn}"
	echo "       Data lives in ./data; logs show warnings only (NANOHOST_LOG_LEVEL=info scripts/serve.sh for all)." >&2
fi
exec bin/nanohost-full serve "$@"
