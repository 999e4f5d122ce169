# syntax=docker/dockerfile:1
#
# The production agent image: Node with the Claude Code CLI, git and common
# build tools, and nanoagent (cmd/nanoagent) as the entrypoint.
#
#   docker build -t nanohost-agent:latest .
#   docker build --build-arg CLAUDE_CODE_VERSION=1.0.0 -t nanohost-agent:latest .
#
# nanohost runs it locked down (docs/agent-protocol.md): read-only root
# filesystem, a tmpfs /tmp and HOME, every capability dropped, as the
# non-root user below. Tests use scripts/test-image.sh instead (FROM scratch,
# works offline).

ARG GO_VERSION=1.26
ARG NODE_VERSION=22

# --- nanoagent, a static binary -------------------------------------------
FROM golang:${GO_VERSION}-bookworm AS nanoagent
WORKDIR /src
COPY go.mod go.sum ./
# go.mod replaces go-graphviz and chroma with the forks in third_party/.
COPY third_party ./third_party
RUN go mod download
COPY cmd/nanoagent ./cmd/nanoagent
COPY internal ./internal
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/nanoagent ./cmd/nanoagent

# --- the agent image --------------------------------------------------------
FROM node:${NODE_VERSION}-bookworm-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        git ca-certificates curl jq less procps ripgrep tzdata unzip \
        build-essential python3 python3-pip python3-venv \
 && rm -rf /var/lib/apt/lists/*

ARG CLAUDE_CODE_VERSION=latest
RUN npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
 && npm cache clean --force

COPY --from=nanoagent /out/nanoagent /usr/local/bin/nanoagent

# HOME must not exist in the image: nanohost mounts a fresh tmpfs there owned
# by the container user (Docker would copy an existing directory's owner and
# mode over the tmpfs options). Claude Code keeps its sessions in
# $HOME/.claude, which nanohost mounts per group so `--resume` works across
# containers. TZ is the host's when nanohost passes one.
ENV HOME=/home/agent \
    TZ=UTC \
    DISABLE_AUTOUPDATER=1 \
    NANOAGENT_AGENT=claude

WORKDIR /workspace/group

# The base image's non-root user "node" (uid 1000).
USER node

ENTRYPOINT ["/usr/local/bin/nanoagent"]
CMD ["run"]
