#!/bin/sh
# runc for the CRI-O node, with two changes to a bundle before runc reads it, each what containerd's nodes get from
# a setting CRI-O lacks:
# - a negative process.oomScoreAdj is raised to 0: this machine's capability bounding set has no CAP_SYS_RESOURCE,
#   so runc cannot lower oom_score_adj and every create would fail (CRI-O 1.36 hard-codes -998 for the infra
#   container). containerd: restrict_oom_score_adj.
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
  # CRI-O writes the bundle pretty-printed: -z reads it whole, so a pattern may span lines.
  sed -i -z -E -e 's/"oomScoreAdj":[[:space:]]*-[0-9]+/"oomScoreAdj": 0/' \
    -e 's/,[[:space:]]*"hugepageLimits":[[:space:]]*\[[^]]*\]//' -e 's/"hugepageLimits":[[:space:]]*\[[^]]*\][[:space:]]*,?//' \
    "$bundle/config.json"
fi
exec runc "$@"
