#!/usr/bin/env bash
# A real one-node Kubernetes for the Kubernetes runtime's tests, on this
# machine, with nothing pulled from a registry:
#
#   scripts/kube-test-cluster.sh up        build once (cached), start, print KUBECONFIG=<path> last
#   scripts/kube-test-cluster.sh down      stop it and remove every process, mount, netns and link it made
#   scripts/kube-test-cluster.sh import IMAGE...   copy local Docker images into the node (idempotent)
#   scripts/kube-test-cluster.sh status    exit 0 when the cluster answers
#   scripts/kube-test-cluster.sh build     only build (and cache) the Kubernetes binaries
#
# What runs (all as root, all bound to loopback or to the node address below):
#   etcd            Debian's etcd-server, 127.0.0.1:$port_base+79
#   kube-apiserver  127.0.0.1:$port_base+43 (token auth, RBAC+Node authorization)
#   controller-manager, scheduler  127.0.0.1 secure ports $port_base+57/+59
#   containerd      Debian's, a SEPARATE instance from Docker's: own root, state,
#                   socket, runc root and CNI config; namespace k8s.io
#   kubelet         cgroupfs driver (these hosts use cgroup v1), node address
#                   $node_ip on a veth whose peer sits in a netns of ours
#                   (logs and attach need a node address that is not loopback)
#   pods            CNI bridge $bridge with $pod_cidr, no masquerading
#
# kube-apiserver, controller-manager, scheduler, kubelet and kubectl are built
# from k8s.io/kubernetes $version through a tiny tools module (the module's
# own ./staging replaces make `go install` impossible) and cached in
# ${XDG_CACHE_HOME:-~/.cache}/nanohost/kubernetes/$version: the cold build takes
# ~7 min on 2 cores, a warm `up` ~10 s. Stay on 1.35: newer kubelets drop cgroup v1.
#
# The cluster's files live in $NANOHOST_KUBE_STATE (default /var/tmp/nanohost-kube);
# tests find its kubeconfig there. Docker's engine, its containerd and its
# docker0 bridge are never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"

version="v1.35.4"
staging_version="v0.35.4"
cache="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/nanohost/kubernetes/$version"
bin="$cache/bin"
state="${NANOHOST_KUBE_STATE:-/var/tmp/nanohost-kube}"
port_base="${NANOHOST_KUBE_PORT_BASE:-26400}"
node_name="nanohost-node"
node_ip="${NANOHOST_KUBE_NODE_IP:-10.231.17.1}"
pod_cidr="${NANOHOST_KUBE_POD_CIDR:-10.231.18.0/24}"
service_cidr="10.231.19.0/24"
netns="nhk8s-node"
veth_host="nhk8s-host"
veth_peer="nhk8s-peer"
bridge="nhk8s0"
pause_image="nanohost-kube-pause:busybox"

etcd_port=$((port_base + 79))
etcd_peer_port=$((port_base + 80))
api_port=$((port_base + 43))
kubelet_port=$((port_base + 50))
kubelet_healthz_port=$((port_base + 48))
cm_port=$((port_base + 57))
sched_port=$((port_base + 59))

sock="$state/containerd/containerd.sock"
kubeconfig="$state/kubeconfig"

log() { echo "kube-test-cluster: $*" >&2; }
die() {
	log "$*"
	exit 1
}

need_root() {
	[ "$(id -u)" = 0 ] || die "must run as root (it starts containerd and a kubelet, and makes a netns and links)"
}

apt_packages() {
	local missing=()
	command -v etcd >/dev/null || missing+=(etcd-server)
	command -v containerd >/dev/null || missing+=(containerd)
	[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
	command -v openssl >/dev/null || missing+=(openssl)
	[ -x /bin/busybox ] && [[ "$(ldd /bin/busybox 2>&1 || true)" == *"not a dynamic"* ]] || missing+=(busybox-static)
	[ ${#missing[@]} = 0 ] && return
	log "installing Debian packages: ${missing[*]}"
	# policy-rc.d keeps Debian's etcd service from starting on install where
	# there is a service manager; we run our own etcd.
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; } ||
		{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
}

# --- build -------------------------------------------------------------------

commands=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

built() {
	local c
	for c in "${commands[@]}"; do [ -x "$bin/$c" ] || return 1; done
}

build() {
	built && return
	mkdir -p "$cache"
	exec 8>"$cache/.build.lock"
	flock 8
	built && return
	local started src
	started=$(date +%s)
	log "building Kubernetes $version (once; cached in $cache, ~7 min on 2 cores)"
	src="$cache/src"
	rm -rf "$src" "$cache/bin.new"
	mkdir -p "$src"
	(
		cd "$src"
		export GOWORK=off GOFLAGS=-mod=mod
		local gomod
		gomod="$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
		[ -f "$gomod" ] || die "could not download k8s.io/kubernetes@$version from the module proxy"
		{
			echo "module k8stools"
			echo
			echo "go 1.25"
			echo
			echo "require k8s.io/kubernetes $version"
			echo
			# k8s.io/kubernetes replaces its staging modules by ./staging paths,
			# which only exist in its own repository: point each at its published version.
			sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#replace \1 => \1 '"$staging_version"'#p' "$gomod"
		} >go.mod
		{
			echo "//go:build tools"
			echo
			echo "package tools"
			echo
			echo "import ("
			for c in "${commands[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
			echo ")"
		} >tools.go
		go mod tidy >/dev/null
		# Without the version stamp the servers report v0.0.0 and clients refuse them.
		local ldflags="-s -w"
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=35 -X $pkg.gitTreeState=clean"
		done
		mkdir -p "$cache/bin.new"
		local pkgs=()
		for c in "${commands[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
		nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$cache/bin.new/" "${pkgs[@]}"
	)
	rm -rf "$bin"
	mv "$cache/bin.new" "$bin"
	rm -rf "$src"
	log "built Kubernetes $version in $(($(date +%s) - started)) s"
}

# --- up ----------------------------------------------------------------------

pid_alive() { [ -f "$state/pids/$1" ] && kill -0 "$(cat "$state/pids/$1")" 2>/dev/null; }

start() { # name command...
	local name="$1"
	shift
	"$@" >"$state/logs/$name.log" 2>&1 &
	echo $! >"$state/pids/$name"
}

wait_for() { # what seconds command...
	local what="$1" seconds="$2" i
	shift 2
	for ((i = 0; i < seconds * 10; i++)); do
		"$@" >/dev/null 2>&1 && return
		sleep 0.1
	done
	die "$what did not come up in ${seconds}s; see $state/logs/"
}

kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }

healthy() {
	[ -f "$kubeconfig" ] && pid_alive kubelet && pid_alive kube-apiserver &&
		kubectl get node "$node_name" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True
}

untainted() {
	[ -z "$(kubectl get node "$node_name" -o jsonpath='{.spec.taints}')" ]
}

pki() {
	local d="$state/pki"
	mkdir -p "$d"
	(
		cd "$d"
		openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=nanohost-test-ca" -keyout ca.key -out ca.crt 2>/dev/null
		cert() { # name cn subjectAltName
			openssl req -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
			printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$3" >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
		}
		cert apiserver kube-apiserver "IP:127.0.0.1,IP:$node_ip,IP:${service_cidr%.*}.1,DNS:localhost,DNS:kubernetes.default.svc"
		cert kubelet "system:node:$node_name" "IP:$node_ip,DNS:$node_name"
		cert apiserver-kubelet-client kube-apiserver-kubelet-client "DNS:kube-apiserver"
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	)
}

write_kubeconfig() { # file user token
	cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: nanohost-test
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $state/pki/ca.crt
users:
- name: $2
  user:
    token: $3
contexts:
- name: nanohost-test
  context: {cluster: nanohost-test, user: $2}
current-context: nanohost-test
EOF
	chmod 600 "$1"
}

tokens() {
	local admin kubelet cm sched
	admin=$(openssl rand -hex 24)
	kubelet=$(openssl rand -hex 24)
	cm=$(openssl rand -hex 24)
	sched=$(openssl rand -hex 24)
	cat >"$state/tokens.csv" <<EOF
$admin,nanohost-test-admin,1,"system:masters"
$kubelet,system:node:$node_name,2,"system:nodes"
$cm,system:kube-controller-manager,3
$sched,system:kube-scheduler,4
EOF
	chmod 600 "$state/tokens.csv"
	write_kubeconfig "$kubeconfig.tmp" nanohost-test-admin "$admin"
	write_kubeconfig "$state/kubelet.kubeconfig" "system:node:$node_name" "$kubelet"
	write_kubeconfig "$state/controller-manager.kubeconfig" system:kube-controller-manager "$cm"
	write_kubeconfig "$state/scheduler.kubeconfig" system:kube-scheduler "$sched"
}

network() {
	ip netns add "$netns"
	echo "$netns" >>"$state/made/netns"
	ip link add "$veth_host" type veth peer name "$veth_peer" netns "$netns"
	echo "$veth_host" >>"$state/made/links"
	ip addr add "$node_ip/32" dev "$veth_host"
	ip link set "$veth_host" up
	ip -n "$netns" link set "$veth_peer" up
	ip -n "$netns" link set lo up
	# The CNI bridge plugin makes the bridge when the first pod starts; down removes it.
	echo "$bridge" >>"$state/made/links"
	mkdir -p "$state/cni/net.d"
	cat >"$state/cni/net.d/10-nanohost.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "nanohost-test",
  "plugins": [{
    "type": "bridge", "bridge": "$bridge", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr"}]], "dataDir": "$state/cni/ipam"}
  }]
}
EOF
}

containerd_config() {
	mkdir -p "$state/containerd"
	cat >"$state/containerd/config.toml" <<EOF
version = 2
root = "$state/containerd/root"
state = "$state/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$sock"
[ttrpc]
  address = "$sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$state/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/$pause_image"
  # No CAP_SYS_RESOURCE in these machines' root: lowering oom_score_adj fails.
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$state/runc"
        SystemdCgroup = false
EOF
}

kubelet_config() {
	mkdir -p "$state/kubelet" "$state/pod-logs"
	cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
tlsCertFile: $state/pki/kubelet.crt
tlsPrivateKeyFile: $state/pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $state/pki/ca.crt}
# Only the API server holds a client certificate of the test CA.
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
podLogsDir: $state/pod-logs
serializeImagePulls: false
# Images are imported, never pulled: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
maxPods: 60
# Docker's pids limit for our containers has no pod setting: it is the kubelet's.
podPidsLimit: 512
# No iptables chains on the host (Docker's host): nothing here needs them.
makeIPTablesUtilChains: false
registerNode: true
EOF
}

pause() {
	if ! docker image inspect "$pause_image" >/dev/null 2>&1; then
		local ctx
		ctx="$(mktemp -d)"
		cp /bin/busybox "$ctx/busybox"
		# A binary named /pause would make busybox exit at once: call sleep.
		printf 'FROM scratch\nCOPY busybox /busybox\nENTRYPOINT ["/busybox","sleep","2147483647"]\nLABEL nanohost.kube-test-cluster=pause\n' >"$ctx/Dockerfile"
		DOCKER_BUILDKIT=0 docker build -q -t "$pause_image" "$ctx" >/dev/null 2>&1
		rm -rf "$ctx"
	fi
	import_images "$pause_image"
}

# import_images copies Docker images into the node's containerd unless it
# already holds the same image (compared by Docker's image id label).
import_images() {
	local img id have ref
	for img in "$@"; do
		id="$(docker image inspect -f '{{.Id}}' "$img" 2>/dev/null)" || die "no Docker image $img to import (build it first, e.g. scripts/test-image.sh)"
		ref="docker.io/library/$img"
		[[ "$img" == */* ]] && ref="$img"
		have="$(ctr --address "$sock" -n k8s.io images ls "name==$ref" 2>/dev/null | awk 'NR>1{print $0}')"
		if [ -n "$have" ] && [ -f "$state/imported/$(echo "$ref" | tr '/:' '__')" ] &&
			[ "$(cat "$state/imported/$(echo "$ref" | tr '/:' '__')")" = "$id" ]; then
			continue
		fi
		docker save "$img" | ctr --address "$sock" -n k8s.io images import --no-unpack - >/dev/null
		mkdir -p "$state/imported"
		echo "$id" >"$state/imported/$(echo "$ref" | tr '/:' '__')"
		log "imported $img into the node"
	done
}

up() {
	need_root
	if healthy; then
		echo "KUBECONFIG=$kubeconfig"
		return
	fi
	if [ -d "$state" ]; then
		log "a half-started cluster is in $state: taking it down first"
		down
	fi
	apt_packages
	build
	command -v docker >/dev/null && docker info >/dev/null 2>&1 || die "needs the Docker engine to build the pause image and hand images to the node"
	local started
	started=$(date +%s.%N)
	mkdir -p "$state"/{pids,logs,made}
	iptables_chains >"$state/made/iptables-before"
	pki
	tokens
	network
	containerd_config
	kubelet_config

	start etcd etcd --name nanohost-test --data-dir "$state/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
		--listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
		--initial-cluster "nanohost-test=http://127.0.0.1:$etcd_peer_port" --log-level warn
	start containerd containerd --config "$state/containerd/config.toml"
	wait_for etcd 30 curl -sf "http://127.0.0.1:$etcd_port/health"

	start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
		--bind-address 127.0.0.1 --advertise-address "$node_ip" --secure-port "$api_port" \
		--tls-cert-file "$state/pki/apiserver.crt" --tls-private-key-file "$state/pki/apiserver.key" \
		--client-ca-file "$state/pki/ca.crt" --token-auth-file "$state/tokens.csv" \
		--authorization-mode RBAC,Node --enable-admission-plugins NodeRestriction \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$state/pki/sa.pub" --service-account-signing-key-file "$state/pki/sa.key" \
		--service-cluster-ip-range "$service_cidr" \
		--kubelet-preferred-address-types InternalIP \
		--kubelet-certificate-authority "$state/pki/ca.crt" \
		--kubelet-client-certificate "$state/pki/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$state/pki/apiserver-kubelet-client.key"
	mv "$kubeconfig.tmp" "$kubeconfig"
	wait_for kube-apiserver 60 kubectl get --raw /readyz
	start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$state/controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$cm_port" --leader-elect=false \
		--service-account-private-key-file "$state/pki/sa.key" --root-ca-file "$state/pki/ca.crt" \
		--use-service-account-credentials=true
	start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false
	wait_for containerd 30 ctr --address "$sock" version
	pause
	start kubelet "$bin/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$state/kubelet.kubeconfig" \
		--root-dir "$state/kubelet" --cert-dir "$state/kubelet/pki" \
		--hostname-override "$node_name" --node-ip "$node_ip"
	wait_for "the node" 90 healthy
	# The node lifecycle controller lifts the not-ready taint once the node is Ready.
	wait_for "the node's not-ready taint to go" 60 untainted
	# Pods need their namespace's default service account before they are admitted.
	wait_for "the default service account" 30 kubectl -n default get serviceaccount default
	if [ -n "${NANOHOST_TEST_IMAGE:-}" ] && docker image inspect "$NANOHOST_TEST_IMAGE" >/dev/null 2>&1; then
		import_images "$NANOHOST_TEST_IMAGE"
	fi
	log "cluster ready in $(echo "$(date +%s.%N) - $started" | bc 2>/dev/null || echo "?") s (from built binaries)"
	echo "KUBECONFIG=$kubeconfig"
}

# --- down --------------------------------------------------------------------

# iptables_chains lists the KUBE-* chains in the host's tables as "table chain".
iptables_chains() {
	local t
	command -v iptables >/dev/null || return 0
	for t in filter nat mangle; do
		iptables -t "$t" -S 2>/dev/null | awk -v t="$t" '$1 == "-N" && $2 ~ /^KUBE-/ {print t, $2}'
	done
}

stop_pid() { # name
	local f="$state/pids/$1" pid i
	[ -f "$f" ] || return 0
	pid="$(cat "$f")"
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for ((i = 0; i < 50; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$f"
}

# Our containerd's shims carry our socket in their command line; Docker's do not.
our_shims() {
	local p
	for p in /proc/[0-9]*; do
		{ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- "-address $sock " && echo "${p#/proc/}"
	done
	return 0
}

down() {
	need_root
	[ -d "$state" ] || return 0
	stop_pid kubelet
	stop_pid kube-scheduler
	stop_pid kube-controller-manager
	local netnses=() task ns
	if [ -S "$sock" ] && ctr --address "$sock" version >/dev/null 2>&1; then
		# The pods' network namespaces, read from their sandboxes' specs before they go.
		while read -r ns; do [ -n "$ns" ] && netnses+=("$ns"); done < <(
			for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
				ctr --address "$sock" -n k8s.io containers info "$c" 2>/dev/null |
					grep -o '"/var/run/netns/cni-[0-9a-f-]*"' | tr -d '"'
			done | sort -u
		)
		for task in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
		done
		sleep 0.5
		for task in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
			ctr --address "$sock" -n k8s.io tasks delete -f "$task" >/dev/null 2>&1 || true
		done
	fi
	stop_pid containerd
	local pid
	for pid in $(our_shims); do kill -9 "$pid" 2>/dev/null || true; done
	stop_pid kube-apiserver
	stop_pid etcd
	# Mounts under our state directory (container rootfs, pod volumes, shm), deepest first.
	local m
	for m in $(awk -v d="$state/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	for ns in "${netnses[@]}"; do
		[ -e "$ns" ] && ip netns delete "$(basename "$ns")" 2>/dev/null || true
	done
	if [ -f "$state/made/netns" ]; then
		while read -r ns; do ip netns delete "$ns" 2>/dev/null || true; done <"$state/made/netns"
	fi
	if [ -f "$state/made/links" ]; then
		while read -r link; do ip link delete "$link" 2>/dev/null || true; done <"$state/made/links"
	fi
	# The kubelet's own iptables chains, when it made some anyway (not
	# the ones that were there before up).
	local table chain
	iptables_chains | while read -r table chain; do
		grep -qx "$table $chain" "$state/made/iptables-before" 2>/dev/null && continue
		iptables -t "$table" -S 2>/dev/null | grep -E "^-A [A-Z]+ .*-j $chain\$" | sed 's/^-A/-D/' |
			while read -r rule; do eval "iptables -t $table $rule" 2>/dev/null || true; done || true
		iptables -t "$table" -F "$chain" 2>/dev/null || true
		iptables -t "$table" -X "$chain" 2>/dev/null || true
	done
	rm -rf "$state"
	log "down: stopped and removed everything under $state"
}

case "${1:-}" in
up) up ;;
down) down ;;
build) build ;;
status) healthy ;;
import)
	shift
	need_root
	healthy || die "the cluster is not up (scripts/kube-test-cluster.sh up)"
	import_images "$@"
	;;
*)
	sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
