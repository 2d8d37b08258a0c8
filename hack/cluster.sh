#!/usr/bin/env bash
# Starts and stops a real local control plane: etcd, kube-apiserver (TLS, RBAC + Node authorization, service
# accounts), kube-controller-manager and kube-scheduler, and two real nodes (kubelet, containerd, runc, CNI,
# kube-proxy; hack/nodes.sh) with the API server on the nodes' bridge. With CSI_HANDOVER_KWOK_NODES=<n> (make
# bench-scale) also KWOK and n fake nodes it plays (label csi-handover.io/kwok=true, tainted so only pods that
# ask land there).
# Everything runtime lives under .local/ (git-ignored): pki/, etcd/, logs/, pids/, nodes/, kwok/, kubeconfig.
#   hack/cluster.sh up     start (idempotent: a running cluster is left alone; adds KWOK when asked)
#   hack/cluster.sh down   stop every process it started, and check none is left
#   hack/cluster.sh running   exit 0 if this state dir's API server runs
#   hack/cluster.sh restart <etcd|kube-apiserver|kube-controller-manager|kube-scheduler> [TERM|KILL] [seconds down]
#                          a fault: stop one control-plane process (gracefully, or as a crash) and start it again
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
local_dir="${CSI_HANDOVER_LOCAL:-$root/.local}"
pki="$local_dir/pki" logs="$local_dir/logs" pids="$local_dir/pids"
etcd_port="${ETCD_PORT:-22379}" etcd_peer_port="${ETCD_PEER_PORT:-22380}"
api_port="${APISERVER_PORT:-16443}" kcm_port="${KCM_PORT:-20257}" sched_port="${SCHEDULER_PORT:-20259}"
kubeconfig="$local_dir/kubeconfig"
node_net="${NODE_NET:-10.200}"
# The nodes reach the API server on the host's end of their bridge (the kubernetes Service's endpoint).
api_addr="$node_net.0.1"
kwok_nodes="${CSI_HANDOVER_KWOK_NODES:-0}"
KWOK_LABEL=csi-handover.io/kwok

log() { echo "[cluster] $*" >&2; }

alive() { [[ -f "$pids/$1" ]] && kill -0 "$(cat "$pids/$1")" 2>/dev/null; }

# start <name> <cmd...>: runs in its own session (setsid) so `down` can signal its whole process group.
start() {
  local name="$1"; shift
  if alive "$name"; then log "$name already running (pid $(cat "$pids/$name"))"; return; fi
  setsid "$@" >"$logs/$name.log" 2>&1 </dev/null 9>&- &
  echo $! >"$pids/$name"
  log "started $name (pid $!)"
}

gen_pki() {
  [[ -f "$pki/.complete-2" ]] && return
  mkdir -p "$pki" && cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=csi-handover-local-ca" 2>/dev/null
  cert() { # cert <name> <subject> [sans]
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    local ext=""
    [[ -n "${3:-}" ]] && { printf 'subjectAltName=%s\n' "$3" >"$1.ext"; ext="-extfile $1.ext"; }
    # shellcheck disable=SC2086
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 3650 $ext 2>/dev/null
    rm -f "$1.csr"
  }
  cert apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.0.0.1,IP:$node_net.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin "/O=system:masters/CN=kubernetes-admin"
  cert kube-controller-manager "/CN=system:kube-controller-manager"
  cert kube-scheduler "/CN=system:kube-scheduler"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
  openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  touch .complete-2
  cd - >/dev/null
}

write_kubeconfig() { # write_kubeconfig <file> <cert-name> <user>
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://$api_addr:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: $3
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: local
  context: {cluster: local, user: $3}
current-context: local
KC
}

# port_free <address:port> <name>: a port another process holds would make <name> exit, or answer for it.
port_free() {
  alive "$2" && return
  local holder
  holder="$(ss -Hltnp "( sport = :${1##*:} )" 2>/dev/null | grep -F " $1 " | grep -oE 'users:\(\("[^"]+",pid=[0-9]+' | head -1 || true)"
  [[ -z "$holder" ]] || { log "$1, which $2 needs, is taken by ${holder#users:((}: stop that (another local cluster? its hack/cluster.sh down) or set the port variables"; exit 1; }
}

wait_ready() { # wait_ready <name> <url> <seconds> [curl args]
  local name="$1" url="$2" deadline=$((SECONDS + $3)); shift 3
  until curl -fsS --max-time 2 "$@" "$url" >/dev/null 2>&1; do
    if ! alive "$name"; then log "$name exited; last log lines:"; tail -20 "$logs/$name.log" >&2; exit 1; fi
    if ((SECONDS > deadline)); then log "$name not ready at $url in time; last log lines:"; tail -20 "$logs/$name.log" >&2; exit 1; fi
    sleep 0.2
  done
  log "$name ready"
}

up() {
  local bin
  [[ "$kwok_nodes" =~ ^[0-9]+$ ]] || { log "CSI_HANDOVER_KWOK_NODES=$kwok_nodes: a number of fake nodes, please"; exit 2; }
  bin="${CSI_HANDOVER_BIN_DIR:-$("$root/hack/bins.sh")}"
  mkdir -p "$logs" "$pids" "$local_dir/etcd"
  gen_pki
  write_kubeconfig "$kubeconfig" admin kubernetes-admin
  write_kubeconfig "$local_dir/kube-controller-manager.kubeconfig" kube-controller-manager system:kube-controller-manager
  write_kubeconfig "$local_dir/kube-scheduler.kubeconfig" kube-scheduler system:kube-scheduler

  "$root/hack/nodes.sh" net-up 9>&-
  # The nodes' runtimes and images need no API server: they come up while the control plane does. Every way out
  # of `up` waits for them, so no import is still writing when a `down` or another `up` takes the lock.
  local nodes_pid=""
  if [[ -z "${CONTROL_PLANE_ONLY:-}" ]]; then
    CSI_HANDOVER_BIN_DIR="$bin" "$root/hack/nodes.sh" runtimes 9>&- &
    nodes_pid=$!
    trap 'wait '"$nodes_pid"' 2>/dev/null || true' EXIT
  fi
  port_free "127.0.0.1:$etcd_port" etcd; port_free "127.0.0.1:$etcd_peer_port" etcd; port_free "$api_addr:$api_port" kube-apiserver
  port_free "127.0.0.1:$kcm_port" kube-controller-manager; port_free "127.0.0.1:$sched_port" kube-scheduler
  start etcd "$bin/etcd" --name local --data-dir "$local_dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "local=http://127.0.0.1:$etcd_peer_port" --unsafe-no-fsync --log-level warn
  wait_ready etcd "http://127.0.0.1:$etcd_port/health" 60

  # Every request the operator's service accounts make is audited (metadata only; nobody else's): the RBAC test
  # checks its roles against what it really does.
  cat >"$local_dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:csi-handover"]
  - level: None
POLICY
  # The API server runs on the host, outside every node's kube-proxy: it reaches webhook Services by their ready
  # endpoints (--enable-aggregator-routing, as control planes off the pod network do), routed to the pod subnets.
  start kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address "$api_addr" --advertise-address "$api_addr" --secure-port "$api_port" \
    --enable-admission-plugins NodeRestriction \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --authorization-mode Node,RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
    --enable-aggregator-routing=true \
    --audit-policy-file "$local_dir/audit-policy.yaml" --audit-log-path "$logs/audit.log" \
    --audit-log-maxsize 200 --audit-log-maxbackup 1 --audit-log-format json \
    --profiling=false --v=1
  wait_ready kube-apiserver "https://$api_addr:$api_port/readyz" 120 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key"

  start kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig "$local_dir/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$local_dir/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$local_dir/kube-controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$kcm_port" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false --profiling=false --v=1
  wait_ready kube-controller-manager "https://127.0.0.1:$kcm_port/healthz" 60 -k

  start kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig "$local_dir/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$local_dir/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$local_dir/kube-scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$sched_port" --leader-elect=false --profiling=false --v=1
  wait_ready kube-scheduler "https://127.0.0.1:$sched_port/healthz" 60 -k

  # Pods can be created once the service-account controller has made the default account.
  local deadline=$((SECONDS + 60))
  until "$bin/kubectl" --kubeconfig "$kubeconfig" -n default get serviceaccount default >/dev/null 2>&1; do
    ((SECONDS < deadline)) || { log "no default service account after 60s"; exit 1; }
    sleep 0.2
  done

  # A control-plane restart (a fault) leaves the nodes, their images and KWOK as they are.
  [[ -n "${CONTROL_PLANE_ONLY:-}" ]] && { log "control plane up"; return; }
  wait "$nodes_pid" || { log "the nodes' runtimes or images did not come up (above)"; exit 1; }
  trap - EXIT
  CSI_HANDOVER_BIN_DIR="$bin" "$root/hack/nodes.sh" up 9>&-
  ((kwok_nodes == 0)) || kwok_up "$bin"
  log "cluster up; export KUBECONFIG=$kubeconfig"
}

# KWOK with KWOK's own node stages and pod-ready (from its module, hack/bins.sh) and our pod stages
# (hack/kwok/pod-stages.yaml), managing only the fake nodes this creates.
kwok_up() {
  local bin="$1" i
  mkdir -p "$local_dir/kwok"
  cat "$bin/kwok-stages-upstream.yaml" "$root/hack/kwok/pod-stages.yaml" >"$local_dir/kwok/stages.yaml"
  start kwok "$bin/kwok" --kubeconfig "$kubeconfig" --config "$local_dir/kwok/stages.yaml" \
    --manage-nodes-with-label-selector "$KWOK_LABEL=true" --cidr "${KWOK_POD_CIDR:-10.96.0.0/16}" --node-ip 10.96.255.254 \
    --node-lease-duration-seconds 40
  for ((i = 1; i <= kwok_nodes; i++)); do
    cat <<NODE
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  labels: {$KWOK_LABEL: "true", kubernetes.io/hostname: kwok-node-$i, type: kwok}
  annotations: {kwok.x-k8s.io/node: fake}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
---
NODE
  done | "$bin/kubectl" --kubeconfig "$kubeconfig" apply -f - >/dev/null
  if ! "$bin/kubectl" --kubeconfig "$kubeconfig" wait --for=condition=Ready node -l "$KWOK_LABEL=true" --timeout=60s >/dev/null; then
    log "KWOK's nodes are not Ready after 60s; last log lines:"; tail -20 "$logs/kwok.log" >&2; exit 1
  fi
  log "kwok: $kwok_nodes fake node(s) Ready"
}

down() {
  local name left=0
  # KWOK's fake nodes go with it: left in etcd they would be NotReady nodes of the next cluster. Their pods
  # go with them (the pod garbage collector deletes pods bound to a node that no longer exists).
  if alive kwok && alive kube-apiserver; then
    "${CSI_HANDOVER_BIN_DIR:-$("$root/hack/bins.sh" 2>/dev/null)}/kubectl" --kubeconfig "$kubeconfig" delete nodes -l "$KWOK_LABEL=true" --wait=false >/dev/null || left=1
  fi
  # Real nodes first, while the API server still answers.
  if [[ -d "$local_dir/nodes" ]]; then "$root/hack/nodes.sh" down || left=1; fi
  # Reverse start order. The API server, its nodes gone, waits out requests in flight after SIGTERM until killed
  # (15 s here, its log stopping at AfterShutdownDelayDuration); what it serves is in etcd, which stops after it.
  for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop_component "$name" TERM "$([[ "$name" == kube-apiserver ]] && echo 3 || echo 15)"
    rm -f "$pids/$name"
  done
  # Anything still running under our state dir is a leak: kill it and report it.
  local leftovers
  leftovers="$(pgrep -f -- "$local_dir" | tr '\n' ' ' || true)"
  leftovers="${leftovers% }"
  if [[ -n "$leftovers" ]]; then
    log "killing leftover processes: $leftovers"
    # shellcheck disable=SC2086
    kill -KILL $leftovers 2>/dev/null || true
    left=1
  fi
  return "$left"
}

# Alive and not a zombie: an exited process waits a second or two for this machine's init to reap it, and
# `kill -0` still finds it until then.
running() { local st; st="$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$1/stat" 2>/dev/null)" && [[ -n "$st" && "$st" != Z ]]; }

# stop_component <name> <signal> [seconds, 15]: signal its process group, wait until it is gone, then SIGKILL it.
stop_component() {
  local pid
  alive "$1" || return 0
  pid="$(cat "$pids/$1")"
  kill "-$2" -- "-$pid" 2>/dev/null || kill "-$2" "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((${3:-15} * 10))); do running "$pid" || break; sleep 0.1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$pids/$1"
  log "stopped $1 (SIG$2)"
}

restart_component() { # restart_component <name> <signal> <seconds down>: `up` starts again only what is not running
  case "$1" in etcd|kube-apiserver|kube-controller-manager|kube-scheduler) ;; *) log "restart: not a control-plane process: $1"; exit 2 ;; esac
  case "$2" in TERM|KILL) ;; *) log "restart: TERM or KILL, not $2"; exit 2 ;; esac
  [[ "$3" =~ ^[0-9]+$ ]] || { log "restart: seconds down must be a whole number, not $3"; exit 2; }
  alive kube-apiserver || { log "restart: no cluster runs here"; exit 1; }
  stop_component "$1" "$2"
  if (($3 > 0)); then log "keeping $1 down for $3 s"; sleep "$3"; fi
  CONTROL_PLANE_ONLY=1 up
}

# One cluster.sh at a time on a state dir: two `up`s at once (an interrupted test run's, still going, and a new
# one) start two sets of nodes under the same names, and one set's network is left behind. The lock is fd 9, closed
# for every process a run starts (they outlive it).
if [[ "${1:-}" =~ ^(up|down|wipe|restart)$ ]]; then
  mkdir -p "$local_dir"
  exec 9>>"$local_dir/cluster.lock"
  if ! flock -n 9; then
    log "another hack/cluster.sh is running on $local_dir; waiting for it (at most 10 minutes)"
    flock -w 600 9 || { log "it still runs after 10 minutes: giving up"; exit 1; }
  fi
fi

case "${1:-}" in
  up) up ;;
  restart) restart_component "${2:-}" "${3:-TERM}" "${4:-0}" ;;
  running) alive kube-apiserver ;;
  down) down ;;
  wipe) down || true; rm -rf "$local_dir/etcd" "$local_dir/nodes" "$local_dir/kwok" "$logs" ;;
  *) echo "usage: $0 up|down|wipe|running|restart <component> [TERM|KILL] [seconds down]" >&2; exit 2 ;;
esac
