#!/usr/bin/env bash
# Builds the agent image every Docker test uses, nanohost-agent:test, FROM
# scratch: a static nanoagent (CGO_ENABLED=0) and a static busybox whose
# applets (sh, cat, ls, echo, sleep, env, id, …) are symlinked into /bin.
# No base image is pulled, so it works offline. The busybox is Debian's
# busybox-static ($NANOHOST_BUSYBOX overrides), fetched when missing.
#
# Idempotent and fast: the inputs (nanoagent binary, busybox, this script)
# are hashed into a label, and the build is skipped when the image already
# carries that hash. Concurrent callers (parallel test packages) serialise on
# a lock.
#
#   scripts/test-image.sh [IMAGE]      (default nanohost-agent:test, or $NANOHOST_TEST_IMAGE)
set -euo pipefail
cd "$(dirname "$0")/.."

image="${1:-${NANOHOST_TEST_IMAGE:-nanohost-agent:test}}"
label="nanohost.test-image.inputs"

exec 9>"${TMPDIR:-/tmp}/nanohost-test-image.lock"
flock 9

# A static busybox: Debian's busybox-static. Without one, the script installs
# it (root, or password-less sudo), else unpacks Debian's package into a
# cache without installing anything (apt-get download needs no root).
cache="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/nanohost/busybox-static"
find_busybox() {
	local candidate
	for candidate in "${NANOHOST_BUSYBOX:-}" /bin/busybox /usr/bin/busybox "$(command -v busybox || true)" "$cache/root/bin/busybox"; do
		# ldd exits non-zero on a static binary, hence the captured output.
		if [ -n "$candidate" ] && [ -x "$candidate" ] && [[ "$(ldd "$candidate" 2>&1 || true)" == *"not a dynamic executable"* ]]; then
			echo "$candidate"
			return
		fi
	done
}
apt_install() {
	DEBIAN_FRONTEND=noninteractive "$@" apt-get install -y -qq busybox-static >/dev/null 2>&1 ||
		{ "$@" apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive "$@" apt-get install -y -qq busybox-static >/dev/null; }
}
busybox="$(find_busybox)"
if [ -z "$busybox" ]; then
	echo "test-image: no static busybox found; getting Debian's busybox-static" >&2
	if [ "$(id -u)" = 0 ]; then
		apt_install
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		apt_install sudo -n
	else
		rm -rf "$cache" && mkdir -p "$cache" &&
			(cd "$cache" && apt-get download -qq busybox-static >/dev/null && dpkg-deb -x busybox-static_*.deb root)
	fi || true
	busybox="$(find_busybox)"
	if [ -z "$busybox" ]; then
		echo "test-image: could not get a static busybox; install Debian's busybox-static (apt-get install busybox-static) or set NANOHOST_BUSYBOX" >&2
		exit 1
	fi
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
# No /tmp and no home directory: nanohost mounts fresh tmpfs there, and
# Docker would copy an existing directory's owner and mode over the options.
mkdir -p "$ctx/rootfs/bin" "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc" \
	"$ctx/rootfs/workspace/group" "$ctx/rootfs/workspace/ipc"

# -trimpath and no build id make the binary reproducible, so its hash only
# changes when the code does.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -buildid=" -o "$ctx/rootfs/usr/local/bin/nanoagent" ./cmd/nanoagent

inputs="$(cat "$ctx/rootfs/usr/local/bin/nanoagent" "$busybox" "$0" | sha256sum | cut -c1-32)"
current="$(docker image inspect -f "{{ index .Config.Labels \"$label\" }}" "$image" 2>/dev/null || true)"
if [ "$current" = "$inputs" ]; then
	exit 0
fi

cp "$busybox" "$ctx/rootfs/bin/busybox"
for applet in sh ash cat ls echo printf sleep env id kill true false test [ touch rm mkdir mv cp \
	grep sed head tail wc date stat pwd tr seq yes dd find xargs chmod readlink uname hostname whoami \
	ln mkfifo cut sort uniq awk basename dirname; do
	ln -s busybox "$ctx/rootfs/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\n' >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nagent:x:1000:\n' >"$ctx/rootfs/etc/group"

cat >"$ctx/Dockerfile" <<EOF
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/bin HOME=/home/agent TZ=UTC
USER 1000:1000
WORKDIR /workspace/group
ENTRYPOINT ["/usr/local/bin/nanoagent"]
CMD ["run"]
LABEL $label="$inputs"
EOF

echo "test-image: building $image" >&2
previous="$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)"
DOCKER_BUILDKIT=0 docker build -q -t "$image" "$ctx" >/dev/null 2>"$ctx/build.log" || {
	cat "$ctx/build.log" >&2
	exit 1
}
# The image it replaced is now untagged: remove it (unless a container still
# uses it) so rebuilds do not pile up dangling images.
if [ -n "$previous" ] && [ "$(docker image inspect -f '{{len .RepoTags}}' "$previous" 2>/dev/null)" = 0 ]; then
	docker image rm "$previous" >/dev/null 2>&1 || true
fi
