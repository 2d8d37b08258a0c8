#!/usr/bin/env bash
# Standalone CRI-O proof: a private net+mount+uts namespace (like hack/nodes.sh's node anchor), images loaded
# with copyimg, crio started in it, one pod with a long-running and a run-to-completion container driven by
# crictl, everything recorded, then torn down (also on failure; KEEP=1 keeps the scratch dir's files).
# Usage: standalone-proof.sh <bin dir printed by hack/bins-crio.sh> <scratch dir, e.g. /tmp/crio-try>
# Env: CPUSET (infra_ctr_cpuset, default 0-1; empty to leave it unset, which stock 1.36.3 on cgroup v1 needs),
# DROP_INFRA (drop_infra_ctr, default true). Root only; touches nothing outside the scratch dir but the
# cgroups under /crio-try.
set -euo pipefail
B="$1" S="$2" CPUSET="${CPUSET-0-1}"
I="$HOME/.cache/csi-handover/images" CNI_BIN="$HOME/.cache/csi-handover/bin"
UID_="7c0ffee0-0000-4000-8000-000000000002" CG="/crio-try/pod7c0ffee0-0000-4000-8000-000000000002"
# The CRI-O node's own runc wrapper (what containerd's settings give that CRI-O lacks: hack/crio-runc.sh).
RUNC="$(cd "$(dirname "$0")/../.." && pwd)/crio-runc.sh"
mkdir -p "$S"/{etc/crio.conf.d,etc/cni,storage/root,storage/run,run,lib,log/pods,tmp,node/var-lib,node/var-log}
say() { printf '\n### %s\n' "$*"; }

cat >"$S/etc/policy.json" <<'EOF'
{"default":[{"type":"insecureAcceptAnything"}]}
EOF
cat >"$S/etc/cni/10-crio-try.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "crio-try", "plugins": [{"type": "bridge", "bridge": "crio-try0", "isGateway": true,
  "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.255.77.0/24"}]], "dataDir": "$S/run/cni-ipam"}}]}
EOF
cat >"$S/etc/crio.conf" <<EOF
[crio]
root = "$S/storage/root"
runroot = "$S/storage/run"
storage_driver = "overlay"
log_dir = "$S/log/pods"
version_file = "$S/run/version"
clean_shutdown_file = "$S/lib/clean.shutdown"
internal_repair = false

[crio.api]
listen = "$S/run/crio.sock"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
selinux = false
apparmor_profile = "unconfined"
seccomp_profile = ""
decryption_keys_path = "$S/etc/keys"
irqbalance_config_file = ""
irqbalance_config_restore_file = "disable"
hooks_dir = []
cdi_spec_dirs = []
container_exits_dir = "$S/run/exits"
container_attach_socket_dir = "$S/run/attach"
namespaces_dir = "$S/run/ns"
pinns_path = "$B/pinns"
enable_criu_support = false
drop_infra_ctr = ${DROP_INFRA:-true}
${CPUSET:+infra_ctr_cpuset = \"$CPUSET\"}
enable_pod_events = true
disable_hostport_mapping = true

[crio.runtime.runtimes.runc]
runtime_path = "$RUNC"
runtime_type = "oci"
runtime_root = "$S/run/runc"
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"
monitor_env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]

[crio.image]
pause_image = "registry.k8s.io/pause:3.10.2"
signature_policy = "$S/etc/policy.json"
signature_policy_dir = "$S/etc/policies"
namespaced_auth_dir = "$S/etc/auth"
big_files_temporary_dir = "$S/tmp"

[crio.network]
network_dir = "$S/etc/cni"
plugin_dirs = ["$CNI_BIN"]

[crio.nri]
enable_nri = false
EOF
printf 'runtime-endpoint: unix://%s/run/crio.sock\nimage-endpoint: unix://%s/run/crio.sock\ntimeout: 60\n' "$S" "$S" >"$S/crictl.yaml"
cat >"$S/pod.json" <<EOF
{"metadata": {"name": "try-pod", "namespace": "crio-try", "uid": "$UID_", "attempt": 0}, "hostname": "try-pod",
 "log_directory": "$S/log/pods/crio-try_try-pod_$UID_",
 "labels": {"io.kubernetes.pod.name": "try-pod", "io.kubernetes.pod.namespace": "crio-try", "io.kubernetes.pod.uid": "$UID_"},
 "linux": {"cgroup_parent": "$CG", "security_context": {"namespace_options": {"network": 0, "pid": 1, "ipc": 0}}}}
EOF
ctr_json() { # name image log-dir args-json resources-json
  cat <<EOF
{"metadata": {"name": "$1"}, "image": {"image": "$2"}, $3, "log_path": "$1/0.log",
 "labels": {"io.kubernetes.container.name": "$1", "io.kubernetes.pod.name": "try-pod", "io.kubernetes.pod.namespace": "crio-try", "io.kubernetes.pod.uid": "$UID_"},
 "linux": {"resources": $4, "security_context": {"namespace_options": {"network": 0, "pid": 1, "ipc": 0}}}}
EOF
}
ctr_json sleeper csi-handover.local/shell:v1 '"command": ["/bin/sleep", "3600"]' '{"cpu_shares": 2, "oom_score_adj": -997}' >"$S/ctr-sleeper.json"
ctr_json csi-attacher registry.k8s.io/sig-storage/csi-attacher:v4.12.0 '"args": ["--help"]' '{"cpu_shares": 2, "memory_limit_in_bytes": 67108864}' >"$S/ctr-attacher.json"

A=
teardown() {
  set +e
  local p
  [[ -f "$S/events.pid" ]] && kill "$(cat "$S/events.pid")" 2>/dev/null
  [[ -f "$S/crio.pid" ]] && kill -TERM "$(cat "$S/crio.pid")" 2>/dev/null && \
    for _ in $(seq 100); do kill -0 "$(cat "$S/crio.pid")" 2>/dev/null || break; sleep 0.1; done
  for p in $(pgrep -f "^/usr/bin/conmon .*$S/"); do pkill -KILL -P "$p"; kill "$p" 2>/dev/null; done
  [[ -n "$A" ]] && kill "$A" 2>/dev/null; sleep 0.5
  for d in /sys/fs/cgroup/*/crio-try; do [[ -d "$d" ]] && find "$d" -depth -type d -exec rmdir {} +; done
  if mount | grep -q "$S"; then echo "mounts left under $S, not removing it" >&2; return 1; fi
  [[ "${KEEP:-0}" == 1 ]] || rm -rf "$S"
}
trap teardown EXIT

say "anchor namespace (net, mount with private /var/lib /var/log /run, uts)"
setsid unshare --net --mount --uts --propagation private --fork -- bash -c '
  set -e; hostname crio-try
  mount --bind "$1/node/var-lib" /var/lib; mount --bind "$1/node/var-log" /var/log; mount -t tmpfs -o mode=755 tmpfs /run
  ip link set lo up; echo $$ >"$1/anchor.pid.partial"; mv "$1/anchor.pid.partial" "$1/anchor.pid"; exec sleep infinity' anchor "$S" \
  >"$S/anchor.log" 2>&1 </dev/null &
for _ in $(seq 50); do [[ -f "$S/anchor.pid" ]] && break; sleep 0.1; done
A="$(cat "$S/anchor.pid")"; echo "anchor pid $A"
in_ns() { nsenter --target "$A" --net --mount --uts -- "$@"; }

say "images (copyimg, in the anchor's mount namespace)"
for spec in "registry.k8s.io/pause:3.10.2 $I/pause-3.10.2-*.tar" \
    "registry.k8s.io/sig-storage/csi-attacher:v4.12.0 $I/csi-attacher-v4.12.0-*.tar" \
    "csi-handover.local/shell:v1 $I/shell-v1-*.tar"; do
  set -- $spec
  in_ns "$B/copyimg" --root "$S/storage/root" --runroot "$S/storage/run" --storage-driver overlay \
    --signature-policy "$S/etc/policy.json" --import-from "docker-archive:$(ls $2 | head -1)" --image-name "$1"
  echo "imported $1"
done

say "crio"
setsid nsenter --target "$A" --net --mount --uts -- "$B/crio" --config "$S/etc/crio.conf" --config-dir "$S/etc/crio.conf.d" \
  >"$S/crio.log" 2>&1 </dev/null &
echo $! >"$S/crio.pid"
C=("$B/crictl" -c "$S/crictl.yaml")
for _ in $(seq 100); do "${C[@]}" version >/dev/null 2>&1 && break; sleep 0.1; done
"${C[@]}" version; "${C[@]}" images
setsid "${C[@]}" events -o json >"$S/events.json" 2>/dev/null </dev/null &
echo $! >"$S/events.pid"; sleep 0.5

say "pod + containers"
POD="$("${C[@]}" runp "$S/pod.json")"; echo "pod $POD"
mkdir -p "$S/log/pods/crio-try_try-pod_$UID_"/{sleeper,csi-attacher}   # kubelet creates the container log dirs
SL="$("${C[@]}" create "$POD" "$S/ctr-sleeper.json" "$S/pod.json")"; "${C[@]}" start "$SL" >/dev/null
AT="$("${C[@]}" create "$POD" "$S/ctr-attacher.json" "$S/pod.json")"; "${C[@]}" start "$AT" >/dev/null
sleep 2; "${C[@]}" pods; "${C[@]}" ps -a

say "processes and cgroups (cpu, memory, pids; all v1 hierarchies get the same path)"
for p in $(pgrep -f "^/usr/bin/conmon .*$S/"); do
  id="$(tr '\0' ' ' </proc/"$p"/cmdline | grep -o -- '-c [0-9a-f]*' | cut -c4-)"
  echo "conmon pid $p ppid $(awk '{print $4}' /proc/"$p"/stat) for ${id:0:12} cpus $(taskset -pc "$p" | sed 's/.*: //'): $(grep '^1:' /proc/"$p"/cgroup)"
  for c in $(pgrep -P "$p"); do
    echo "  $(cat /proc/"$c"/comm) pid $c oom_score_adj $(cat /proc/"$c"/oom_score_adj): $(grep '^1:' /proc/"$c"/cgroup)"
  done
done
echo "crio: $(grep '^1:' /proc/"$(cat "$S/crio.pid")"/cgroup)"
find /sys/fs/cgroup/cpu"$CG" -mindepth 1 -type d

say "bundle of the sleeper"
ls "$S/storage/run/overlay-containers/$SL/userdata" "$S/storage/root/overlay-containers/$SL/userdata"
python3 - "$S/storage/run/overlay-containers/$SL/userdata/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
a = c["annotations"]
for k in sorted(a):
    if k.startswith(("io.kubernetes.pod.", "io.kubernetes.container.")) or k in (
            "io.kubernetes.cri-o.ContainerType", "io.kubernetes.cri-o.SandboxID", "io.kubernetes.cri-o.Name",
            "io.kubernetes.cri-o.LogPath", "io.kubernetes.cri-o.ContainerID"):
        print(f"  {k} = {a[k]}")
print("  linux.cgroupsPath =", c["linux"]["cgroupsPath"])
print("  process.oomScoreAdj (after the runc wrapper) =", c["process"].get("oomScoreAdj"))
EOF

say "exec (in the anchor's netns: the stream server listens on its 127.0.0.1)"
in_ns "${C[@]}" exec "$SL" /bin/sh -c 'echo exec-ok in $(hostname)'

say "stop the sleeper, exit files"
"${C[@]}" stop -t 2 "$SL" >/dev/null; sleep 0.5
echo "persisted: $S/storage/root/overlay-containers/$SL/userdata/exit = '$(cat "$S/storage/root/overlay-containers/$SL/userdata/exit")'"
echo "persisted: $S/storage/root/overlay-containers/$AT/userdata/exit = '$(cat "$S/storage/root/overlay-containers/$AT/userdata/exit")'"
echo "container_exits_dir now: $(ls -A "$S/run/exits")"
"${C[@]}" ps -a

say "remove"
"${C[@]}" rm "$SL" "$AT"; "${C[@]}" stopp "$POD"; "${C[@]}" rmp "$POD"
echo "cgroups left under $CG: $(find /sys/fs/cgroup/cpu"$CG" -mindepth 1 -type d -printf '%f ')"

say "events (one line per event: type, container, sandbox state, container states)"
sleep 0.5; kill "$(cat "$S/events.pid")"
python3 - "$S/events.json" <<'EOF'
import json, sys
raw = open(sys.argv[1]).read(); dec = json.JSONDecoder(); i = 0
while i < len(raw):
    while i < len(raw) and raw[i].isspace(): i += 1
    if i >= len(raw): break
    e, i = dec.raw_decode(raw, i)
    print(e["containerEventType"], e["containerId"][:12], e["createdAt"], (e.get("podSandboxStatus") or {}).get("state"),
          [(c["metadata"]["name"], c["state"], c["exitCode"], c["reason"]) for c in e.get("containersStatuses") or []])
EOF

say "what landed in the anchor's /var/lib, /var/log, /run"
find "$S/node" -mindepth 2; in_ns find /run -mindepth 1

say "stop crio, the anchor; mounts left in the anchor after crio stopped:"
kill -TERM "$(cat "$S/crio.pid")"; for _ in $(seq 100); do kill -0 "$(cat "$S/crio.pid")" 2>/dev/null || break; sleep 0.1; done
in_ns sh -c "mount | grep -c '$S' || true"
