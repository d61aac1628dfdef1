#!/usr/bin/env bash
# Runs the cluster commands of docs/deploy.md against a throw-away single-node
# Kubernetes cluster on this machine: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and a kubelet on 127.0.0.1, with a
# private containerd 2.x (NRI on) as the container runtime, all in a network
# namespace of their own. Not part of CI; it needs root.
#
# usage: deploy/local-cluster/run.sh [--keep]
#
#   --keep   leave the cluster running and print how to reach it (through
#            nsenter into its network namespace); stop it later with:
#            kill <the printed pid> (the script cleans up then)
#
# What it does, in order: builds what is missing (Kubernetes and etcd from the
# Go module proxy, containerd like the e2e suite, kustomize), the logger image
# (deploy/build-images) and a busybox image for the sandbox and the test pod
# (buildah, from Debian's busybox-static); starts the cluster; applies the
# logger overlay; starts a pod and finds its events in the plugin's log;
# upgrades the plugin with `kustomize edit set image` and checks the rollout;
# takes its socket away and checks that it logs its reconnection attempts
# (`kubectl rollout undo` restores it), and that with -no-reconnect it exits
# and `kubectl logs --previous` says why; then stops everything it started
# and removes its directory.
#
# Everything lives under one temporary directory (WORK, default a new
# /tmp/nri-k8s.XXXXXX): certificates, etcd's data, containerd's root, state
# and sockets, the kubelet's root directory and pod logs.
#
# Network: once the binaries are built (the only step that uses the network),
# the script runs itself again under `unshare --net`, in a network namespace
# of its own with nothing but lo, which it brings up (127.0.0.1) and gives the
# node's address 10.235.0.1. Every daemon runs in there, on free ports of
# 127.0.0.1; the pods' bridge (10.234.0.0/24, and the ip_forward the bridge
# plugin sets) is made in there too; service addresses (10.233.0.0/24) are
# only allocated, nothing routes them. The namespace has no route out, nothing
# is added to or changed on the host's interfaces, and the namespace goes
# away with its last process (at exit every process still in it is killed by
# pid). Nothing touches the host's /run/containerd or /var/run/nri:
# the DaemonSet's socket directory is pointed at WORK/nri by an overlay on top
# of deploy/kustomize/overlays/logger (the one change the test needs).
#
# Side effects outside WORK, undone at exit: the kubelet sets the kernel
# tunables it wants (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops,
# kernel.keys.root_maxkeys/root_maxbytes; restored), creates pod cgroups under
# /nri-rs-local-cluster in each cgroup v1 hierarchy (removed) and links
# container logs into /var/log/containers (removed when it made the directory).
#
# Environment: K8S_VERSION (v1.34.4), ETCD_VERSION (v3.6.4),
# CONTAINERD_VERSION (v2.4.2), KUSTOMIZE_VERSION (v5.5.0), CACHE (built
# binaries, default ~/.cache/nri-rs-e2e), CARGO_TARGET_DIR (for build-images).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
keep=false
case ${1:-} in
    --keep) keep=true ;;
    "") ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
esac

K8S_VERSION=${K8S_VERSION:-v1.34.4}
ETCD_VERSION=${ETCD_VERSION:-v3.6.4}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
KUSTOMIZE_VERSION=${KUSTOMIZE_VERSION:-v5.5.0}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nri-rs-e2e}
NODE=nri-node
# The node's address: the kubelet refuses a loopback one, and the API server
# reaches the kubelet (kubectl logs) there. On the lo of the cluster's own
# network namespace (below), never on the host's.
NODE_IP=10.235.0.1
pause_ref=localhost/nri-rs-local/busybox:1
CGROUP_ROOT=/nri-rs-local-cluster

say() { echo "local-cluster: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (kubelet, containerd, runc)"
for tool in go cargo openssl buildah kubectl runc python3 unshare ip; do
    command -v "$tool" >/dev/null || die "$tool not found"
done
[ -d /usr/lib/cni ] || die "no CNI plugins in /usr/lib/cni (apt-get install containernetworking-plugins)"
[ -x /bin/busybox ] && file -L /bin/busybox | grep -q static ||
    die "no static /bin/busybox (apt-get install busybox-static)"

# ---------------------------------------------------------------- binaries

# Kubernetes from the module proxy: the module's zip has no staging/ tree, so
# the staging replace directives are pointed at the published modules of the
# same release (k8s.io/api v0.34.4 for v1.34.4 and so on).
k8s_bin=$CACHE/kubernetes-$K8S_VERSION
if [ ! -x "$k8s_bin/kubelet" ]; then
    say "building Kubernetes $K8S_VERSION (takes a while)"
    src=$(cd /tmp && go mod download -json "k8s.io/kubernetes@$K8S_VERSION" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
    build=$(mktemp -d /tmp/nri-k8s-src.XXXXXX)
    cp -r "$src/." "$build"
    chmod -R u+w "$build"
    rm -rf "$build/vendor" "$build/go.work" "$build/go.work.sum"
    staging=v0.${K8S_VERSION#v1.}
    sed -i -E "s#^(\s*)(k8s\.io/[a-z0-9-]+) => \./staging/src/k8s\.io/[a-z0-9-]+#\1\2 => \2 $staging#" "$build/go.mod"
    mkdir -p "$k8s_bin.tmp"
    # The version a release build stamps (a plain build says v0.0.0-master).
    major=${K8S_VERSION#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
    ldflags=
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    done
    (cd "$build" && GOFLAGS=-mod=mod nice -n 19 go build -ldflags "$ldflags" -o "$k8s_bin.tmp/" \
        ./cmd/kube-apiserver ./cmd/kube-controller-manager ./cmd/kube-scheduler ./cmd/kubelet)
    rm -rf "$build" "$k8s_bin"
    mv "$k8s_bin.tmp" "$k8s_bin"
fi

etcd_bin=$CACHE/etcd-$ETCD_VERSION/etcd
if [ ! -x "$etcd_bin" ]; then
    say "building etcd $ETCD_VERSION"
    build=$(mktemp -d /tmp/nri-etcd-src.XXXXXX)
    cat > "$build/main.go" <<'EOF'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
    (cd "$build" && go mod init local/etcd >/dev/null 2>&1 &&
        go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1 &&
        nice -n 19 go build -o "$etcd_bin" .)
    rm -rf "$build"
fi

ctrd_bin=$CACHE/containerd-$CONTAINERD_VERSION/bin
if [ ! -x "$ctrd_bin/containerd" ]; then
    say "building containerd $CONTAINERD_VERSION"
    mkdir -p "$ctrd_bin"
    m=github.com/containerd/containerd/v2
    GOBIN=$ctrd_bin nice -n 19 go install "-ldflags=-X $m/version.Version=$CONTAINERD_VERSION" \
        "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
        "$m/cmd/ctr@$CONTAINERD_VERSION"
fi

crictl_bin=$CACHE/crictl-v1.37.0/bin/crictl
if [ ! -x "$crictl_bin" ]; then
    say "building crictl v1.37.0"
    GOBIN=$(dirname "$crictl_bin") nice -n 19 go install sigs.k8s.io/cri-tools/cmd/crictl@v1.37.0
fi

kustomize_bin=$CACHE/kustomize-$KUSTOMIZE_VERSION/kustomize
if [ ! -x "$kustomize_bin" ]; then
    say "building kustomize $KUSTOMIZE_VERSION"
    GOBIN=$(dirname "$kustomize_bin") nice -n 19 go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
fi

# ---------------------------------------------------------------- network namespace

# The rest runs in a network namespace of its own (see the top): the script
# starts itself again under `unshare --net` (exec keeps the pid, so `kill $$`
# still stops the run). deploy/build-images (below) runs in there, without a
# network: its crates are fetched first.
netns=$(readlink /proc/self/ns/net)
if [ -z "${NRI_LOCAL_CLUSTER_HOST_NETNS:-}" ]; then
    (cd "$root" && cargo fetch --locked >/dev/null)
    say "entering a network namespace of its own (unshare --net)"
    NRI_LOCAL_CLUSTER_HOST_NETNS=$netns exec unshare --net -- "$BASH" "$0" "$@"
fi
[ "$netns" != "$NRI_LOCAL_CLUSTER_HOST_NETNS" ] || die "not in a network namespace of its own"
ip link set lo up
ip addr add "$NODE_IP/32" dev lo
say "network namespace $netns:"
ip -brief addr show >&2

# ---------------------------------------------------------------- state

WORK=${WORK:-$(mktemp -d /tmp/nri-k8s.XXXXXX)}
mkdir -p "$WORK"/{pki,logs,images,nri,cni/net.d,kubelet,pod-logs}
pids=()
sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
    kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
saved_sysctls=()
for s in "${sysctls[@]}"; do saved_sysctls+=("$s=$(sysctl -n "$s")"); done
made_var_log_containers=false
[ -d /var/log/containers ] || made_var_log_containers=true

cleanup() {
    local rc=$?
    set +e
    say "stopping (exit status $rc)"
    # The kubelet first, so that it restarts nothing; then every pod through
    # CRI (which releases their network), then the daemons, newest first.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        if [ "${names[$i]}" = containerd ]; then
            timeout 60 "$crictl_bin" --runtime-endpoint "unix://$WORK/containerd.sock" rmp -a -f >/dev/null 2>&1
        fi
        kill "${pids[$i]}" 2>/dev/null
        for _ in $(seq 100); do kill -0 "${pids[$i]}" 2>/dev/null || break; sleep 0.1; done
        kill -9 "${pids[$i]}" 2>/dev/null
        wait "${pids[$i]}" 2>/dev/null
    done
    # Shims and anything else still naming WORK, by pid.
    for p in $(grep -l -F "$WORK" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
        [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null
    done
    grep -F " $WORK" /proc/mounts | awk '{ print $2 }' | sort -r | while read -r m; do
        umount -l "$m" 2>/dev/null
    done
    for h in /sys/fs/cgroup/*/; do
        [ -d "$h${CGROUP_ROOT#/}" ] && find "$h${CGROUP_ROOT#/}" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    # Anything else still in the network namespace (a hostNetwork pod's
    # process, say), by pid: the namespace, its lo address and the pods'
    # bridge go away with its last process, this script.
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" != $$ ] && [ "$(readlink "/proc/$p/ns/net" 2>/dev/null)" = "$netns" ] &&
            kill -9 "$p" 2>/dev/null
    done
    for s in "${saved_sysctls[@]}"; do sysctl -q -w "$s" >/dev/null 2>&1; done
    [ -n "${upgrade_tag:-}" ] && buildah rmi "localhost/nri-rs/logger:$upgrade_tag" >/dev/null 2>&1
    buildah rmi "$pause_ref" >/dev/null 2>&1
    if $made_var_log_containers; then
        find /var/log/containers -type l -lname "$WORK/*" -delete 2>/dev/null
        rmdir /var/log/containers 2>/dev/null
    fi
    if [ $rc -ne 0 ]; then
        for f in "$WORK"/logs/*.log; do
            [ -f "$f" ] && { echo "--- last lines of $f" >&2; tail -n 20 "$f" >&2; }
        done
    fi
    rm -rf "$WORK"
    exit $rc
}
names=()
trap cleanup EXIT
trap 'exit 130' INT TERM

start() { # name command...
    local name=$1
    shift
    "$@" > "$WORK/logs/$name.log" 2>&1 &
    pids+=($!)
    names+=("$name")
}

wait_for() { # seconds description command...
    local deadline=$((SECONDS + $1)) what=$2
    shift 2
    until "$@" > "$WORK/wait.out" 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            tail -n 20 "$WORK/wait.out" >&2
            die "timed out waiting for $what"
        fi
        for i in "${!pids[@]}"; do
            kill -0 "${pids[$i]}" 2>/dev/null || die "${names[$i]} exited"
        done
        sleep 1
    done
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---------------------------------------------------------------- certificates

pki=$WORK/pki
cert() { # name subject extensions
    openssl req -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "$2" 2>/dev/null
    openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
        -days 2 -out "$pki/$1.crt" -extfile <(printf '%s\n' "$3") 2>/dev/null
}
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 2 \
    -subj /CN=nri-rs-local-cluster-ca 2>/dev/null
cert apiserver /CN=kube-apiserver \
    "subjectAltName=IP:127.0.0.1,IP:10.233.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
# One client identity (system:masters) for kubectl and every component.
cert admin "/O=system:masters/CN=admin" "extendedKeyUsage=clientAuth"
openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null

etcd_port=$(free_port)
etcd_peer=$(free_port)
api_port=$(free_port)
export KUBECONFIG=$WORK/admin.kubeconfig
kubectl config set-cluster local --server="https://127.0.0.1:$api_port" \
    --certificate-authority="$pki/ca.crt" --embed-certs >/dev/null
kubectl config set-credentials admin --client-certificate="$pki/admin.crt" \
    --client-key="$pki/admin.key" --embed-certs >/dev/null
kubectl config set-context local --cluster=local --user=admin >/dev/null
kubectl config use-context local >/dev/null

# ---------------------------------------------------------------- control plane

say "starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler"
start etcd "$etcd_bin" --name local --data-dir "$WORK/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "local=http://127.0.0.1:$etcd_peer"
start kube-apiserver "$k8s_bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --endpoint-reconciler-type none --cert-dir "$WORK/apiserver" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --authorization-mode Node,RBAC \
    --service-cluster-ip-range 10.233.0.0/24 \
    --service-account-issuer https://kubernetes.default.svc \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
    --kubelet-preferred-address-types InternalIP
wait_for 120 "kube-apiserver /readyz" kubectl get --raw /readyz
start kube-controller-manager "$k8s_bin/kube-controller-manager" \
    --kubeconfig "$KUBECONFIG" --authentication-kubeconfig "$KUBECONFIG" \
    --authorization-kubeconfig "$KUBECONFIG" \
    --bind-address 127.0.0.1 --secure-port "$(free_port)" --leader-elect=false \
    --controllers '*,-csrsigning' --use-service-account-credentials=false \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt"
start kube-scheduler "$k8s_bin/kube-scheduler" \
    --kubeconfig "$KUBECONFIG" --authentication-kubeconfig "$KUBECONFIG" \
    --authorization-kubeconfig "$KUBECONFIG" \
    --bind-address 127.0.0.1 --secure-port "$(free_port)" --leader-elect=false

# ---------------------------------------------------------------- node

# containerd as the e2e suite runs it (e2e/src/containerd.rs), plus CNI: a
# bridge of its own with host-local addresses, no masquerading. Its NRI socket
# is WORK/nri/nri.sock, the directory the DaemonSet mounts below. Containers
# may not get a negative oom_score_adj here (no CAP_SYS_RESOURCE on some test
# machines), hence restrict_oom_score_adj.
cat > "$WORK/cni/net.d/10-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "nri-local",
  "plugins": [
    { "type": "bridge", "bridge": "nrilocal0", "isGateway": true, "ipMasq": false,
      "ipam": { "type": "host-local", "dataDir": "$WORK/cni/ipam",
                "ranges": [[{ "subnet": "10.234.0.0/24" }]] } }
  ]
}
EOF
cat > "$WORK/containerd.toml" <<EOF
version = 3
root = "$WORK/containerd/root"
state = "$WORK/containerd/state"
[grpc]
  address = "$WORK/containerd.sock"
[ttrpc]
  address = "$WORK/containerd.sock.ttrpc"
[debug]
  address = "$WORK/containerd-debug.sock"
[plugins.'io.containerd.nri.v1.nri']
  disable = false
  socket_path = "$WORK/nri/nri.sock"
  plugin_path = "$WORK/nri-plugins"
  plugin_config_path = "$WORK/nri-conf.d"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "$pause_ref"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_selinux = false
  netns_mounts_under_state_dir = true
[plugins.'io.containerd.cri.v1.runtime'.cni]
  conf_dir = "$WORK/cni/net.d"
  bin_dirs = ["/usr/lib/cni"]
[plugins.'io.containerd.cri.v1.runtime'.containerd]
  default_runtime_name = "runc"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  BinaryName = "$(command -v runc)"
  SystemdCgroup = false
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "$(free_port)"
EOF
say "starting containerd $CONTAINERD_VERSION"
PATH=$ctrd_bin:$PATH start containerd "$ctrd_bin/containerd" --config "$WORK/containerd.toml"
ctr() { "$ctrd_bin/ctr" --address "$WORK/containerd.sock" -n k8s.io "$@"; }
wait_for 60 "containerd" ctr version

# Images: a busybox image serves as the sandbox and the test pod; the plugin
# image comes from deploy/build-images, and a second tag of it stands for the
# upgrade's new version.
say "building images"
c=$(buildah from scratch)
buildah copy "$c" /bin/busybox /bin/busybox >/dev/null
buildah config --cmd '["/bin/busybox", "sleep", "2147483647"]' "$c"
buildah commit -q "$c" "$pause_ref" >/dev/null
buildah rm "$c" >/dev/null
buildah push -q "$pause_ref" "oci-archive:$WORK/images/busybox.tar:$pause_ref"
version=$(awk -F'"' '/^\[workspace.package\]/ { p = 1 } p && /^version *=/ { print $2; exit }' "$root/Cargo.toml")
nice -n 19 "$root/deploy/build-images" --archive-dir "$WORK/images" logger
upgrade_tag=$version-upgrade
buildah tag "localhost/nri-rs/logger:$version" "localhost/nri-rs/logger:$upgrade_tag"
buildah push -q "localhost/nri-rs/logger:$upgrade_tag" \
    "oci-archive:$WORK/images/logger-upgrade.tar:localhost/nri-rs/logger:$upgrade_tag"
for a in "$WORK"/images/*.tar; do ctr images import "$a" >/dev/null; done
ctr images ls -q | grep -qx "localhost/nri-rs/logger:$version" || die "logger image not imported"

# The kubelet's cgroup root must exist in every hierarchy (cgroup v1 here;
# cpuset needs its cpus and mems filled in).
for h in /sys/fs/cgroup/*/; do
    [ "$h" = /sys/fs/cgroup/unified/ ] && continue
    mkdir -p "$h${CGROUP_ROOT#/}"
    if [ -f "$h/cpuset.cpus" ]; then
        cat "$h/cpuset.cpus" > "$h${CGROUP_ROOT#/}/cpuset.cpus"
        cat "$h/cpuset.mems" > "$h${CGROUP_ROOT#/}/cpuset.mems"
    fi
done

kubelet_port=$(free_port)
cat > "$WORK/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $(free_port)
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$WORK/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
failSwapOn: false
oomScoreAdj: 0
podLogsDir: $WORK/pod-logs
resolvConf: /etc/resolv.conf
registerNode: true
evictionHard: {memory.available: "100Mi"}
EOF
say "starting kubelet"
start kubelet "$k8s_bin/kubelet" --config "$WORK/kubelet.yaml" --kubeconfig "$KUBECONFIG" \
    --root-dir "$WORK/kubelet" --cert-dir "$WORK/kubelet/pki" \
    --hostname-override "$NODE" --node-ip "$NODE_IP"
wait_for 120 "node $NODE registered" kubectl get node "$NODE"
kubectl wait --for=condition=Ready "node/$NODE" --timeout=120s
wait_for 60 "service account default/default" kubectl -n default get serviceaccount default
kubectl get nodes -o wide

# ---------------------------------------------------------------- docs/deploy.md

# The overlay as deployed, with one change for this test: the host directory
# of the NRI socket is WORK/nri, not /var/run/nri (mounted at /var/run/nri in
# the container, where the plugin looks by default).
cp -r "$root/deploy/kustomize" "$WORK/kustomize"
mkdir -p "$WORK/kustomize/local"
cat > "$WORK/kustomize/local/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../overlays/logger
patches:
  - target:
      kind: DaemonSet
    patch: |-
      - op: replace
        path: /spec/template/spec/volumes/0/hostPath/path
        value: $WORK/nri
EOF

say "section 4: kubectl kustomize / kubectl apply -k deploy/kustomize/overlays/logger"
kubectl kustomize "$root/deploy/kustomize/overlays/logger" > "$WORK/rendered.yaml"
grep -q "image: localhost/nri-rs/logger:$version" "$WORK/rendered.yaml" || die "overlay renders no logger image"
kubectl apply -k "$WORK/kustomize/local"
kubectl -n kube-system rollout status daemonset/nri-plugin-logger --timeout=120s
kubectl -n kube-system get pods -l app.kubernetes.io/name=nri-plugin-logger -o wide

plugin_logs() { kubectl -n kube-system logs daemonset/nri-plugin-logger; }
wait_for 60 "the plugin to be configured by containerd" \
    bash -c "kubectl -n kube-system logs daemonset/nri-plugin-logger | grep -q 'got configuration data'"

say "section 6: a pod's events in the plugin's log"
kubectl run nri-demo --image="$pause_ref" --image-pull-policy=Never --restart=Never \
    --command -- /bin/busybox sh -c 'echo started; exec /bin/busybox sleep 3600'
kubectl wait --for=condition=Ready pod/nri-demo --timeout=120s
has_events() {
    local log
    log=$(plugin_logs) || return 1
    tail -n 5 <<<"$log"
    # The object dumps of each event name the pod (and its container, also
    # called nri-demo).
    for ev in RunPodSandbox CreateContainer StartContainer; do
        grep -Eq ": $ev: +name: nri-demo\$" <<<"$log" || return 1
    done
}
wait_for 30 "RunPodSandbox, CreateContainer and StartContainer of nri-demo in the plugin's log" has_events
timeout 5 kubectl -n kube-system logs daemonset/nri-plugin-logger -f > "$WORK/follow.log" || true
grep -q nri-demo "$WORK/follow.log" || die "kubectl logs -f shows no nri-demo event"
grep -E ": (RunPodSandbox|CreateContainer|StartContainer): +name: nri-demo\$" "$WORK/follow.log" || true

say "section 5: kustomize edit set image, apply, rollout"
old_pod=$(kubectl -n kube-system get pods -l app.kubernetes.io/name=nri-plugin-logger -o name)
(cd "$WORK/kustomize/overlays/logger" &&
    "$kustomize_bin" edit set image "nri-plugin=localhost/nri-rs/logger:$upgrade_tag")
grep -q "newTag: $upgrade_tag" "$WORK/kustomize/overlays/logger/kustomization.yaml" ||
    die "kustomize edit set image did not change the overlay"
kubectl apply -k "$WORK/kustomize/local"
kubectl -n kube-system rollout status daemonset/nri-plugin-logger --timeout=120s
new_image=$(kubectl -n kube-system get pods -l app.kubernetes.io/name=nri-plugin-logger \
    -o jsonpath='{.items[*].spec.containers[0].image}')
[ "$new_image" = "localhost/nri-rs/logger:$upgrade_tag" ] || die "after the upgrade the pod runs $new_image"
kubectl -n kube-system get "$old_pod" >/dev/null 2>&1 && die "old plugin pod $old_pod still there"
kubectl delete pod nri-demo --wait=true
wait_for 30 "the upgraded plugin to log nri-demo's StopPodSandbox" \
    bash -c "kubectl -n kube-system logs daemonset/nri-plugin-logger | grep -Eq ': StopPodSandbox: +name: nri-demo\$'"
kubectl -n kube-system rollout history daemonset/nri-plugin-logger

say "section 6: a plugin that cannot connect says why in its log"
# Point the socket directory at an empty one: the plugin finds no socket and,
# reconnecting by default, keeps trying and logs each failed attempt.
mkdir -p "$WORK/nri-empty"
kubectl -n kube-system patch daemonset nri-plugin-logger --type=json -p \
    "[{\"op\": \"replace\", \"path\": \"/spec/template/spec/volumes/0/hostPath/path\", \"value\": \"$WORK/nri-empty\"}]"
kubectl -n kube-system rollout status daemonset/nri-plugin-logger --timeout=120s
retrying() {
    kubectl -n kube-system logs daemonset/nri-plugin-logger > "$WORK/retry.log" || return 1
    tail -n 3 "$WORK/retry.log"
    [ "$(grep -c 'reconnecting to the runtime.*/var/run/nri/nri.sock' "$WORK/retry.log")" -ge 2 ]
}
wait_for 60 "the plugin without a socket to log its retries" retrying
grep -m 2 'reconnecting to the runtime' "$WORK/retry.log"
# The previous revision back: the plugin connects again.
kubectl -n kube-system rollout undo daemonset/nri-plugin-logger
kubectl -n kube-system rollout status daemonset/nri-plugin-logger --timeout=120s
wait_for 60 "the plugin to be configured again after the undo" \
    bash -c "kubectl -n kube-system logs daemonset/nri-plugin-logger | grep -q 'got configuration data'"

say "section 6: with -no-reconnect it exits instead, kubectl logs --previous shows why"
kubectl -n kube-system patch daemonset nri-plugin-logger --type=json -p "[
    {\"op\": \"replace\", \"path\": \"/spec/template/spec/volumes/0/hostPath/path\", \"value\": \"$WORK/nri-empty\"},
    {\"op\": \"add\", \"path\": \"/spec/template/spec/containers/0/args/-\", \"value\": \"-no-reconnect\"}]"
restarted() {
    local n
    n=$(kubectl -n kube-system get pods -l app.kubernetes.io/name=nri-plugin-logger \
        -o jsonpath='{.items[*].status.containerStatuses[0].restartCount}')
    echo "restart count: $n"
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ]
}
wait_for 120 "the plugin with -no-reconnect to exit and be restarted" restarted
previous() {
    kubectl -n kube-system logs daemonset/nri-plugin-logger --previous > "$WORK/previous.log" 2>&1
    cat "$WORK/previous.log"
    ls -lR "$WORK/pod-logs"
    kubectl -n kube-system get pods -o yaml | grep -A12 lastState
    grep -q "cannot connect to the NRI socket /var/run/nri/nri.sock" "$WORK/previous.log"
}
wait_for 30 "kubectl logs --previous to show why the plugin exited" previous
cat "$WORK/previous.log"

say "all docs/deploy.md cluster commands passed"
if $keep; then
    say "cluster kept: nsenter --net=/proc/$$/ns/net env KUBECONFIG=$KUBECONFIG kubectl get nodes; stop it with: kill $$"
    wait
fi
