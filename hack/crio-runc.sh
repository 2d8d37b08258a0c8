#!/bin/sh
# runc for the CRI-O node, with three changes to a bundle before runc reads it, each what containerd's nodes get from
# a setting or a default CRI-O lacks:
# - a negative process.oomScoreAdj is raised to 0: this machine's capability bounding set has no CAP_SYS_RESOURCE,
#   so runc cannot lower oom_score_adj and every create would fail (CRI-O 1.36 hard-codes -998 for the infra
#   container). containerd: restrict_oom_score_adj.
# - capabilities outside this process's bounding set go (CAP_SYS_RESOURCE here): CRI-O gives a privileged
#   container every capability it knows of, which runc cannot grant ("unable to apply caps"). containerd gives a
#   privileged container the capabilities it has itself.
# - linux.resources.hugepageLimits go: this host's hugetlb controller is on the cgroup v2 hierarchy, not a v1 one,
#   which CRI-O does not tell apart (it reads /proc/cgroups), so runc fails "cannot set hugetlb limit".
#   containerd: disable_hugetlb_controller, true by default.
# The node declares this script as CRI-O's runtime_path.
bundle= prev=
for a in "$@"; do
  case "$prev" in --bundle | -b) bundle="$a" ;; esac
  case "$a" in --bundle=*) bundle="${a#--bundle=}" ;; esac
  prev="$a"
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  # The capabilities by number (linux/capability.h), and the ones the bounding set lacks, as sed expressions.
  bnd=$((0x$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)))
  n=0 drop=
  for cap in CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE \
      NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE \
      SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE \
      AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF \
      CHECKPOINT_RESTORE; do
    if [ $(((bnd >> n) & 1)) -eq 0 ]; then
      c="\"CAP_$cap\""
      drop="$drop -e s/$c,[[:space:]]*//g -e s/,[[:space:]]*$c//g -e s/$c//g"
    fi
    n=$((n + 1))
  done
  # CRI-O writes the bundle pretty-printed: -z reads it whole, so a pattern may span lines.
  # shellcheck disable=SC2086
  sed -i -z -E -e 's/"oomScoreAdj":[[:space:]]*-[0-9]+/"oomScoreAdj": 0/' \
    -e 's/,[[:space:]]*"hugepageLimits":[[:space:]]*\[[^]]*\]//' -e 's/"hugepageLimits":[[:space:]]*\[[^]]*\][[:space:]]*,?//' \
    $drop "$bundle/config.json"
fi
exec runc "$@"
