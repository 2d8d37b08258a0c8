#!/usr/bin/env bash
# Real nodes for the local cluster, the way kind runs them but without the outer container: each node is a set
# of namespaces held by one anchor process (network, mount, UTS), a veth into a bridge this script creates, and
# inside it a container runtime (runc, CNI bridge), a kubelet and a kube-proxy of its own. The runtimes are mixed,
# as in a cluster halfway through a runtime migration: node-1 runs containerd, node-2 CRI-O with conmon in
# OpenShift's layout (NODE_RUNTIMES overrides, one word per node; NODE_IMAGES limits the images imported). Nothing is routed off the
# machine; the host's default route, iptables and mounts are not touched, and `down` undoes the rest (cgroups,
# kernel sysctls the kubelet sets, the bridge).
#   hack/nodes.sh runtimes           every node's namespaces, runtime and images, without its kubelet (idempotent)
#   hack/nodes.sh up                 start every node (idempotent), import the images, wait until Ready
#   hack/nodes.sh down               stop every node and remove all it made on the host
#   hack/nodes.sh stop|start <node> <kubelet|runtime|kube-proxy>   a fault: stop (SIGKILL) or start one part
#                                    (runtime: the node's containerd or crio)
#   hack/nodes.sh runtime <node>     which runtime the node runs: containerd or crio
#   hack/nodes.sh freeze|thaw <node> the kubelet stops talking (SIGSTOP) while containers keep running
#   hack/nodes.sh exec <node> cmd…   run a command inside a node's namespaces
#   hack/nodes.sh images             import every image built since into the running nodes (make image)
# Called by hack/cluster.sh, which owns the control plane, the PKI and the state directory.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
local_dir="${CSI_HANDOVER_LOCAL:-$root/.local}"
pki="$local_dir/pki" logs="$local_dir/logs" nodes_dir="$local_dir/nodes"
node_net="${NODE_NET:-10.200}"          # node addresses <net>.0.<10+i>, the host (API server) <net>.0.1
pod_net="${POD_NET:-10.244}"            # pod addresses <pod_net>.<i>.0/24 on node i
node_count="${NODE_COUNT:-2}"
read -r -a node_runtimes <<<"${NODE_RUNTIMES:-containerd crio}"
api_port="${APISERVER_PORT:-16443}"
# Names on the host carry a hash of the state directory, so a second cluster beside this one does not collide.
cluster_id="$(echo "$local_dir" | sha256sum | cut -c1-6)"
cgroup_prefix="csi-handover-$cluster_id"
bridge="csih-$cluster_id"
pause_image="registry.k8s.io/pause:3.10.2"
# Kernel settings the kubelet writes on start (pkg/kubelet/cm setupKernelTunables): saved and put back by `down`.
kernel_sysctls=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

log() { echo "[nodes] $*" >&2; }
die() { log "$*"; exit 1; }
node_names() { local i; for ((i = 1; i <= node_count; i++)); do echo "node-$i"; done; }
node_index() { echo "${1#node-}"; }
# The runtime of node i: the i-th word of NODE_RUNTIMES, the last word for the nodes beyond.
runtime_of() {
  local i; i="$(node_index "$1")"
  local r="${node_runtimes[$((i - 1))]:-${node_runtimes[-1]}}"
  [[ "$r" == containerd || "$r" == crio ]] || die "NODE_RUNTIMES: $r is not containerd or crio"
  echo "$r"
}
runtime_socket() { echo "$nodes_dir/$1/$(runtime_of "$1")/$(runtime_of "$1").sock"; }
pid_of() { cat "$nodes_dir/$1/pids/$2" 2>/dev/null; }
alive() { local p; p="$(pid_of "$1" "$2")" && [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; }
in_node() { local n="$1"; shift; nsenter --target "$(pid_of "$n" anchor)" --net --mount --uts -- "$@"; }

bin_dir() { echo "${CSI_HANDOVER_BIN_DIR:-$("$root/hack/bins.sh")}"; }

node_certs() { # node_certs <node>: kubelet client (Node authorizer) and serving certificates, signed by the cluster CA
  local n="$1" ip="$node_net.0.$((10 + $(node_index "$1")))" d="$nodes_dir/$1/pki"
  [[ -f "$d/.complete" ]] && return
  mkdir -p "$d"
  sign "$d/kubelet-client" "/O=system:nodes/CN=system:node:$n" ""
  sign "$d/kubelet-serving" "/O=system:nodes/CN=system:node:$n" "IP:$ip,DNS:$n"
  touch "$d/.complete"
}

sign() { # sign <path-prefix> <subject> <sans>
  openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  if [[ -n "$3" ]]; then
    openssl x509 -req -in "$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -out "$1.crt" -days 3650 \
      -extfile <(printf 'subjectAltName=%s\n' "$3") 2>/dev/null
  else
    openssl x509 -req -in "$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -out "$1.crt" -days 3650 2>/dev/null
  fi
  rm -f "$1.csr"
}

kubeconfig_for() { # kubeconfig_for <file> <cert prefix>
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://$node_net.0.1:$api_port", certificate-authority: "$pki/ca.crt"}
users:
- name: node
  user: {client-certificate: "$2.crt", client-key: "$2.key"}
contexts:
- name: local
  context: {cluster: local, user: node}
current-context: local
KC
}

# The runtime's configuration file, relative to the node's directory.
runtime_config() { if [[ "$(runtime_of "$1")" == crio ]]; then echo crio/crio.conf; else echo containerd/config.toml; fi; }

# CRI-O 1.36 (hack/bins-crio.sh) as OpenShift's nodes run it: conmon as the monitor, in a cgroup of its own in the
# pod's (monitor_cgroup "pod" with infra_ctr_cpuset set, which OpenShift's performance profiles set), runc as the
# runtime. Storage under the node's directory; the run root at CRI-O's standard path in the node's own /run, where a
# DaemonSet reads the container bundles as it would on any CRI-O node. No seccomp (built without cgo), no
# SELinux/AppArmor, no NRI, no hostport iptables rules: nothing written outside the node.
write_crio_config() { # write_crio_config <node> <bin dir>
  local n="$1" bin="$2" d="$nodes_dir/$1" cpus
  mkdir -p "$d/crio/crio.conf.d"
  cpus="$(cat /sys/fs/cgroup/cpuset/cpuset.cpus 2>/dev/null || cat /sys/fs/cgroup/cpuset.cpus.effective)"
  cat >"$d/crio/policy.json.new" <<'JSON'
{"default": [{"type": "insecureAcceptAnything"}]}
JSON
  cat >"$d/crio/crio.conf.new" <<TOML
[crio]
root = "$d/crio/storage"
runroot = "/run/containers/storage"
storage_driver = "overlay"
log_dir = "/var/log/crio/pods"
version_file = "/run/crio/version"
clean_shutdown_file = "$d/crio/clean.shutdown"
# A repair after an unclean stop (the restart fault) could drop the preloaded images: there is no registry.
internal_repair = false

[crio.api]
listen = "$d/crio/crio.sock"
stream_address = "127.0.0.1"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
selinux = false
apparmor_profile = "unconfined"
seccomp_profile = ""
irqbalance_config_file = ""
irqbalance_config_restore_file = "disable"
hooks_dir = []
cdi_spec_dirs = []
decryption_keys_path = "$d/crio/keys"
container_exits_dir = "/run/crio/exits"
container_attach_socket_dir = "/run/crio"
namespaces_dir = "/run/crio/ns"
pinns_path = "$bin/pinns"
enable_criu_support = false
infra_ctr_cpuset = "$cpus"
enable_pod_events = true
disable_hostport_mapping = true

[crio.runtime.runtimes.runc]
runtime_path = "$root/hack/crio-runc.sh"
runtime_type = "oci"
runtime_root = "/run/runc"
monitor_path = "$(command -v conmon)"
monitor_cgroup = "pod"
monitor_env = ["PATH=$(dirname "$(command -v runc)"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]

[crio.image]
pause_image = "$pause_image"
pinned_images = ["$pause_image"]
signature_policy = "$d/crio/policy.json"
signature_policy_dir = "$d/crio/policies"
namespaced_auth_dir = "$d/crio/auth"
big_files_temporary_dir = "$d/crio/tmp"

[crio.network]
network_dir = "$d/cni"
plugin_dirs = ["$bin"]

[crio.nri]
enable_nri = false
TOML
  if cmp -s "$d/crio/policy.json.new" "$d/crio/policy.json"; then rm -f "$d/crio/policy.json.new"; else mv "$d/crio/policy.json.new" "$d/crio/policy.json"; fi
}

write_configs() { # write_configs <node> <bin dir>
  local n="$1" bin="$2" d="$nodes_dir/$1" i rt; i="$(node_index "$1")" rt="$(runtime_of "$1")"
  mkdir -p "$d/$rt" "$d/cni" "$d/var-lib" "$d/var-log" "$d/pids"
  if [[ "$rt" == crio ]]; then write_crio_config "$n" "$bin"; else
  # containerd: every path under the node's directory; the CRI settings this machine needs (facts §6b).
  cat >"$d/containerd/config.toml.new" <<TOML
version = 4
root = "$d/containerd/root"
# The standard path, in the node's own /run: a DaemonSet reads the task bundles where it would on any node.
state = "/run/containerd"
disabled_plugins = ["io.containerd.nri.v1.nri"]
# The API socket where the host's ctr reaches it; the shims' ttrpc socket stays in the node's own /run.
[plugins."io.containerd.server.v1.grpc"]
  address = "$d/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  cdi_spec_dirs = []
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$d/containerd/runc"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["$bin"]
    conf_dir = "$d/cni"
[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$pause_image"
[plugins."io.containerd.grpc.v1.cri"]
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
[plugins."io.containerd.shim.v1.manager"]
  socket_dir = "/run/containerd/s"
TOML
  fi
  cat >"$d/cni/10-csi-handover.conflist.new" <<JSON
{"cniVersion": "1.0.0", "name": "csi-handover", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_net.$i.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
  kubeconfig_for "$d/kubelet.kubeconfig.new" "$d/pki/kubelet-client"
  kubeconfig_for "$d/kube-proxy.kubeconfig.new" "$pki/kube-proxy"
  # /var/lib and /var/log below are the node's own (bind mounts in its mount namespace).
  cat >"$d/kubelet.yaml.new" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupRoot: /$cgroup_prefix-$n
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$(runtime_socket "$n")
podLogsDir: /var/log/pods
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$d/pki/kubelet-serving.crt"
tlsPrivateKeyFile: "$d/pki/kubelet-serving.key"
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
serializeImagePulls: false
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
YAML
  cat >"$d/kube-proxy.yaml.new" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: $n
bindAddress: $node_net.0.$((10 + i))
clusterCIDR: $pod_net.0.0/16
clientConnection: {kubeconfig: "$d/kube-proxy.kubeconfig"}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The conntrack table size and timeouts are kernel-wide: leave them as the host has them.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
  # Only what changed is replaced: kube-proxy exits when its configuration file changes under it.
  local f
  for f in "$(runtime_config "$n")" cni/10-csi-handover.conflist kubelet.kubeconfig kube-proxy.kubeconfig kubelet.yaml kube-proxy.yaml; do
    if cmp -s "$d/$f.new" "$d/$f"; then rm -f "$d/$f.new"; else mv "$d/$f.new" "$d/$f"; fi
  done
}

# What the clusters of this host share: one file per cluster (id → state dir) and the kernel settings as the
# host had them before the first cluster started; the last cluster to go down puts them back. Kept out of
# every state dir, so a cluster whose state dir was deleted (or a run that was killed) is still accounted for.
run_dir="${CSI_HANDOVER_RUN_DIR:-/run/csi-handover}"

save_host_state() {
  mkdir -p "$run_dir/clusters"
  echo "$local_dir" >"$run_dir/clusters/$cluster_id"
  [[ -f "$run_dir/host-sysctls" ]] && return
  local s
  for s in "${kernel_sysctls[@]}"; do echo "$s=$(sysctl -n "$s")"; done >"$run_dir/host-sysctls.partial"
  mv "$run_dir/host-sysctls.partial" "$run_dir/host-sysctls"
}

# Every cluster id that left a trace on this host: a registration, a bridge, or node cgroups.
cluster_ids() {
  { ls "$run_dir/clusters" 2>/dev/null || true
    ip -o link show type bridge | sed -nE 's/^[0-9]+: csih-([0-9a-f]{6}):.*/\1/p'
    for c in /sys/fs/cgroup/*/csi-handover-*-node-*; do [[ -d "$c" ]] && basename "$c"; done | sed -nE 's/^csi-handover-([0-9a-f]{6})-node-.*/\1/p'
  } | sort -u
}

# A cluster is alive while a process runs in its nodes' cgroups or its state dir, or a node is on its bridge.
cluster_alive() {
  local id="$1" dir
  [[ -n "$(find /sys/fs/cgroup/*/csi-handover-"$id"-node-* -name tasks -exec cat {} + 2>/dev/null | head -1)" ]] && return 0
  [[ -n "$(ip -o link show master "csih-$id" 2>/dev/null)" ]] && return 0
  dir="$(cat "$run_dir/clusters/$id" 2>/dev/null || true)"
  [[ -n "$dir" ]] && pgrep -f -- "$dir/" >/dev/null && return 0
  return 1
}

# A cluster's node cgroups (empty ones: their processes are gone) and its bridge, with the routes through it.
remove_cgroups_and_bridge() { # remove_cgroups_and_bridge <cluster id>
  local c
  for c in /sys/fs/cgroup/*/csi-handover-"$1"-node-*; do
    [[ -d "$c" ]] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if ip link show "csih-$1" >/dev/null 2>&1; then ip link del "csih-$1"; fi
}

# What a dead cluster left (a killed run never reached its `down`): its cgroups, bridge and registration.
reclaim_dead_clusters() {
  local id
  for id in $(cluster_ids); do
    [[ "$id" == "$cluster_id" ]] && continue
    cluster_alive "$id" && continue
    log "reclaiming what a dead cluster left on this host: id $id$( [[ -f "$run_dir/clusters/$id" ]] && echo ", state $(cat "$run_dir/clusters/$id")")"
    remove_cgroups_and_bridge "$id"
    rm -f "$run_dir/clusters/$id"
  done
  # Another live cluster on this node network would take the nodes' replies: refuse, and say which.
  local other
  other="$(ip -o addr show to "$node_net.0.1" | awk '{print $2}' | grep -vxF "$bridge" | head -1 || true)"
  if [[ -n "$other" ]]; then
    id="${other#csih-}"
    die "another local cluster uses $node_net.0.1 (bridge $other$( [[ -f "$run_dir/clusters/$id" ]] && echo ", state dir $(cat "$run_dir/clusters/$id")")): stop it with CSI_HANDOVER_LOCAL=<its state dir> hack/cluster.sh down, or give this one another NODE_NET"
  fi
}

# Our registration goes; the last cluster down puts the kernel settings back.
release_host_state() {
  local id
  rm -f "$run_dir/clusters/$cluster_id"
  for id in $(ls "$run_dir/clusters" 2>/dev/null || true); do cluster_alive "$id" && return 0; done
  if [[ -f "$run_dir/host-sysctls" ]]; then
    # shellcheck disable=SC2046
    sysctl -qw $(cat "$run_dir/host-sysctls") && rm -f "$run_dir/host-sysctls"
  fi
  rm -rf "$run_dir/clusters"
  rmdir "$run_dir" 2>/dev/null || true
}

bridge_up() {
  ip link show "$bridge" >/dev/null 2>&1 && return
  ip link add "$bridge" type bridge
  ip addr add "$node_net.0.1/24" dev "$bridge"
  ip link set "$bridge" up
}

# start_part <node> <name> <cmd...>: a node process, inside the node's namespaces, in its own session.
start_part() {
  local n="$1" name="$2"; shift 2
  alive "$n" "$name" && return
  setsid nsenter --target "$(pid_of "$n" anchor)" --net --mount --uts -- "$@" >>"$logs/$n-$name.log" 2>&1 </dev/null &
  echo $! >"$nodes_dir/$n/pids/$name"
  log "$n: started $name (pid $!)"
}

node_prepare() { # node_prepare <node> <bin dir>: certificates, configs, namespaces and cgroups (idempotent)
  local n="$1" bin="$2" d="$nodes_dir/$1" i ip c
  i="$(node_index "$n")" ip="$node_net.0.$((10 + i))"
  node_certs "$n"
  write_configs "$n" "$bin"
  if ! alive "$n" anchor; then
    # The anchor holds the node's namespaces: its own network, a private mount tree (/ shared inside it only,
    # as kubelet's Bidirectional mounts need) with /var/lib, /var/log and /run of its own, and its hostname.
    # (/run: shim sockets need a short path, and iptables' lock file stays off the host.)
    setsid unshare --net --mount --uts --propagation private --fork -- bash -c '
      set -e; hostname "$1"; mount --make-rshared /
      mount --bind "$2/var-lib" /var/lib; mount --bind "$2/var-log" /var/log; mount -t tmpfs -o mode=755 tmpfs /run
      echo "$$" >"$2/pids/anchor.partial"; mv "$2/pids/anchor.partial" "$2/pids/anchor"; exec sleep infinity' \
      anchor "$n" "$d" >>"$logs/$n-anchor.log" 2>&1 </dev/null &
    local deadline=$((SECONDS + 10))
    until alive "$n" anchor; do ((SECONDS < deadline)) || die "$n: its namespaces did not come up"; sleep 0.05; done
    local host_if="csih-$cluster_id-$i"
    ip link add "$host_if" type veth peer name eth0 netns "$(pid_of "$n" anchor)"
    ip link set "$host_if" master "$bridge" up
    in_node "$n" ip link set lo up
    in_node "$n" ip addr add "$ip/24" dev eth0
    in_node "$n" ip link set eth0 up
    in_node "$n" ip route add default via "$node_net.0.1"
    in_node "$n" sysctl -qw net.ipv4.ip_forward=1
    # Pods of the other nodes through their node; the host reaches every pod the same way.
    local j
    for ((j = 1; j <= node_count; j++)); do
      ((j == i)) || in_node "$n" ip route add "$pod_net.$j.0/24" via "$node_net.0.$((10 + j))"
    done
    ip route replace "$pod_net.$i.0/24" via "$ip" dev "$bridge"
  fi
  # The kubelet's cgroup root must exist, in every hierarchy (cgroup v1), cpuset filled in from the root.
  for c in /sys/fs/cgroup/*/; do
    [[ -d "$c$cgroup_prefix-$n" ]] && continue
    mkdir "$c$cgroup_prefix-$n" 2>/dev/null || continue
    if [[ -f "$c/cpuset.cpus" ]]; then
      cat "$c/cpuset.cpus" >"$c$cgroup_prefix-$n/cpuset.cpus"; cat "$c/cpuset.mems" >"$c$cgroup_prefix-$n/cpuset.mems"
    fi
  done
}

node_up() { # node_up <node> <bin dir> <images>: everything of the node that is not running (a fault's `start`)
  node_prepare "$1" "$2"
  runtime_up "$1" "$2"
  import_images "$1" "$2" "$3"
  node_agents "$1" "$2"
}

node_agents() { # node_agents <node> <bin dir>: the record, kubelet and kube-proxy, over a runtime that is up
  local n="$1" bin="$2" d="$nodes_dir/$1" ip="$node_net.0.$((10 + $(node_index "$1")))"
  # The node's own record of its containers, for tests and benchmarks (hack/node-record.ts): a host process.
  if ! alive "$n" record; then
    local runtime_args=(--ctr "$bin/ctr")
    [[ "$(runtime_of "$n")" == crio ]] && runtime_args=(--runtime crio --crictl "$bin/crictl")
    setsid "$root/hack/node-record.sh" --node "$n" "${runtime_args[@]}" --address "$(runtime_socket "$n")" \
      --kubelet-log "$logs/$n-kubelet.log" --out "$d/record.jsonl" >>"$logs/$n-record.log" 2>&1 </dev/null &
    echo $! >"$d/pids/record"
  fi
  start_part "$n" kubelet "$bin/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$d/kubelet.kubeconfig" \
    --root-dir /var/lib/kubelet --cert-dir "$d/pki" --hostname-override "$n" --node-ip "$ip" --v=2
  start_part "$n" kube-proxy "$bin/kube-proxy" --config "$d/kube-proxy.yaml" --v=1
}

runtime_up() { # runtime_up <node> <bin dir>: start the node's runtime (unless it runs) and wait until it answers
  local n="$1" bin="$2" d="$nodes_dir/$1" rt sock; rt="$(runtime_of "$1")" sock="$(runtime_socket "$1")"
  if [[ "$rt" == crio ]]; then
    # taskset (for infra_ctr_cpuset) and conmon come from PATH.
    start_part "$n" crio "$bin/crio" --config "$d/crio/crio.conf" --config-dir "$d/crio/crio.conf.d"
  else
    start_part "$n" containerd "$bin/containerd" --config "$d/containerd/config.toml"
  fi
  local deadline=$((SECONDS + 30))
  until runtime_answers "$bin" "$rt" "$sock"; do
    alive "$n" "$rt" || { tail -20 "$logs/$n-$rt.log" >&2; die "$n: $rt exited"; }
    ((SECONDS < deadline)) || die "$n: $rt did not answer in 30s"
    sleep 0.1
  done
}

runtime_answers() { # runtime_answers <bin dir> <runtime> <socket>
  if [[ "$2" == crio ]]; then "$1/crictl" --runtime-endpoint "unix://$3" --timeout 2s version >/dev/null 2>&1
  else "$1/ctr" --address "$3" version >/dev/null 2>&1; fi
}

# ctr_k8s <bin dir> <socket> <ctr args…>: ctr in the CRI namespace; it warns about cgroup v1 on every call, so
# that line is dropped and every other message kept.
ctr_k8s() {
  local bin="$1" sock="$2"; shift 2
  "$bin/ctr" --address "$sock" -n k8s.io "$@" 2> >(grep -v 'DEPRECATION: The support for cgroup v1' >&2)
}

# The images of hack/images.sh, one "<ref> <tarball>" per line: built first, so a failed build stops the caller
# (a process substitution would hide its exit status). With NODE_IMAGES (refs, space-separated) only those and the
# pause image: a throwaway cluster that runs a shell pod need not unpack every sidecar into both runtimes.
image_list() {
  local all; all="$(CSI_HANDOVER_BIN_DIR="$1" "$root/hack/images.sh")" || die "building the images failed (above)"
  [[ -n "${NODE_IMAGES:-}" ]] || { echo "$all"; return; }
  local want=" $pause_image $NODE_IMAGES " ref tar
  while read -r ref tar; do [[ "$want" == *" $ref "* ]] && echo "$ref $tar"; done <<<"$all"
  true
}

import_images() { # import_images <node> <bin dir> <images>: every image of the list not yet in the node's runtime
  local n="$1" bin="$2" d="$nodes_dir/$1" images="$3" sock have tar ref rt imported=0; sock="$(runtime_socket "$1")" rt="$(runtime_of "$1")"
  # Tarball names carry their content's key: another one under a tag than the last imported is a rebuilt image.
  have="$d/images-imported"
  touch "$have"
  while read -r ref tar; do
    [[ "$(awk -v r="$ref" '$1 == r { t = $2 } END { print t }' "$have")" == "$tar" ]] && continue
    if [[ "$rt" == crio ]]; then
      # CRI-O pulls only from registries: its own copyimg writes the tarball into its storage, in the node's mount
      # namespace (the run root is the node's /run); containers/storage's locks make this safe beside a running crio.
      in_node "$n" "$bin/copyimg" --root "$d/crio/storage" --runroot /run/containers/storage --storage-driver overlay \
        --signature-policy "$d/crio/policy.json" --import-from "docker-archive:$tar" --image-name "$ref" >/dev/null
    else
      ctr_k8s "$bin" "$sock" images import "$tar" >/dev/null
    fi
    echo "$ref $tar" >>"$have"
    imported=$((imported + 1))
  done <<<"$images"
  ((imported == 0)) || log "$n: $imported image(s) imported"
}

wait_nodes_ready() {
  local kubectl="$1/kubectl" deadline=$((SECONDS + 120)) n
  for n in $(node_names); do
    until [[ "$("$kubectl" --kubeconfig "$local_dir/kubeconfig" get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]; do
      alive "$n" kubelet || { tail -30 "$logs/$n-kubelet.log" >&2; die "$n: kubelet exited"; }
      ((SECONDS < deadline)) || { tail -30 "$logs/$n-kubelet.log" >&2; die "$n: not Ready in 120s"; }
      sleep 0.2
    done
    log "$n Ready"
  done
}

net_up() { mkdir -p "$nodes_dir" "$logs"; reclaim_dead_clusters; save_host_state; bridge_up; }

# Every node's namespaces, runtime and images, the nodes side by side: none of it needs the API server, so
# hack/cluster.sh runs this while the control plane starts. Importing the images is most of a fresh node's start
# (about 10 s each here), and one node's import need not wait for the other's.
runtimes() { # runtimes <bin dir> <images>
  local bin="$1" images="$2" n p pids=() failed=0
  net_up
  # One at a time: signing the node certificates writes the CA's serial file.
  for n in $(node_names); do node_prepare "$n" "$bin"; done
  for n in $(node_names); do
    { runtime_up "$n" "$bin" && import_images "$n" "$bin" "$images"; } &
    pids+=("$!")
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  ((failed == 0)) || die "a node's runtime or images did not come up (above)"
}

up() {
  local bin n images; bin="$(bin_dir)"
  images="$(image_list "$bin")"
  runtimes "$bin" "$images"
  [[ -f "$pki/kube-proxy.crt" ]] || sign "$pki/kube-proxy" "/CN=system:kube-proxy" ""
  for n in $(node_names); do node_agents "$n" "$bin"; done
  wait_nodes_ready "$bin"
}

# Every process whose cgroup is one of ours, or that runs inside a node's namespaces. One grep over every
# process's cgroup file and one find over their mount namespaces: a few commands per process took 5 s.
node_processes() {
  local n anchor_ns p
  {
    grep -ls -- ":/$cgroup_prefix-node-" /proc/[0-9]*/cgroup | cut -d/ -f3 || true
    for n in $(node_names); do
      alive "$n" anchor || continue
      anchor_ns="$(readlink "/proc/$(pid_of "$n" anchor)/ns/mnt")" || continue
      find /proc/[0-9]*/ns/mnt -maxdepth 0 -printf '%l %h\n' 2>/dev/null | awk -v ns="$anchor_ns" '$1 == ns { split($2, d, "/"); print d[3] }' || true
    done
  } | sort -un | while read -r p; do if running "$p"; then echo "$p"; fi; done
  true
}

kill_and_wait() { # kill_and_wait <signal> <pids...>
  local sig="$1"; shift
  (($#)) || return 0
  kill "-$sig" "$@" 2>/dev/null || true
  local _ p
  for _ in $(seq 1 100); do
    for p in "$@"; do running "$p" && { sleep 0.1; continue 2; }; done
    return 0
  done
}

# Alive and not a zombie (a killed container whose shim is gone waits for init to reap it).
running() { local st; st="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$1/stat" 2>/dev/null)" && [[ -n "$st" && "$st" != Z ]]; }

down() {
  local n part pids c
  mkdir -p "$nodes_dir"
  # The kubelets first (so nothing restarts a container), then every container and shim, then the rest.
  for n in $(node_names); do
    for part in record kube-proxy kubelet; do alive "$n" "$part" && kill_and_wait KILL "$(pid_of "$n" "$part")"; done
  done
  # shellcheck disable=SC2046
  kill_and_wait KILL $(node_processes | grep -vxF -f <(for n in $(node_names); do pid_of "$n" anchor; pid_of "$n" "$(runtime_of "$n")"; done) || true)
  for n in $(node_names); do
    for part in "$(runtime_of "$n")" anchor; do alive "$n" "$part" && kill_and_wait KILL "$(pid_of "$n" "$part")"; done
    rm -f "$nodes_dir/$n/pids/"*
  done
  pids="$(node_processes | xargs)"
  # shellcheck disable=SC2086
  [[ -z "$pids" ]] || { log "killing leftover node processes: $(ps -o pid=,comm= -p "${pids// /,}" | xargs)"; kill_and_wait KILL $pids; }
  # Namespaces are gone with their last process (and with them every mount, pod network and veth). Left: cgroups,
  # the bridge (with its routes) and the kernel settings.
  remove_cgroups_and_bridge "$cluster_id"
  for c in /sys/fs/cgroup/*/"$cgroup_prefix"-node-*; do [[ -d "$c" ]] && log "cgroup left behind: $c"; done
  release_host_state
  [[ -z "$pids" ]]
}

case "${1:-}" in
  net-up) net_up ;;
  runtimes) bin="$(bin_dir)"; images="$(image_list "$bin")"; runtimes "$bin" "$images" ;;
  up) up ;;
  down) down ;;
  processes) node_processes ;;
  stop)
    part="$3"; [[ "$part" == runtime ]] && part="$(runtime_of "$2")"
    alive "$2" "$part" && kill_and_wait KILL "$(pid_of "$2" "$part")"; rm -f "$nodes_dir/$2/pids/$part" ;;
  start)
    bin="$(bin_dir)"
    case "$3" in
      kubelet|kube-proxy|runtime|containerd|crio) images="$(image_list "$bin")"; node_up "$2" "$bin" "$images" ;;
      *) die "start: kubelet, kube-proxy or runtime" ;;
    esac ;;
  freeze) kill -STOP "$(pid_of "$2" kubelet)" ;;
  thaw) kill -CONT "$(pid_of "$2" kubelet)" ;;
  exec) n="$2"; shift 2; in_node "$n" "$@" ;;
  runtime) runtime_of "$2" ;;
  images)
    bin="$(bin_dir)"; images="$(image_list "$bin")"
    for n in $(node_names); do alive "$n" "$(runtime_of "$n")" && import_images "$n" "$bin" "$images"; done ;;
  *) echo "usage: $0 up|down|processes|stop|start|freeze|thaw|exec|runtime|images" >&2; exit 2 ;;
esac
