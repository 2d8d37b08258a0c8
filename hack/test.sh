#!/usr/bin/env bash
# What `make test` runs after the static checks: the unit, tools and cluster projects in one vitest run, and beside
# it the second-cluster project (test/cluster/real-nodes.test.ts: a throwaway cluster of its own, sharing nothing
# with the other files) in another, so its 2 minutes overlap theirs; vitest cannot run it concurrently with a
# project whose files run one at a time. It starts once the main cluster (the cluster project's global setup) has
# both nodes Ready: its host-state comparisons then see the main cluster the same before, during and after.
# The last line is the plain "tests: N passed, N failed, N skipped" that CI reads, over both runs.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p .local
main_json=.local/test-results.json second_json=.local/test-results-second-cluster.json second_log=.local/test-second-cluster.log
rm -f "$main_json" "$second_json" "$second_log"
kubectl="${CSI_HANDOVER_BIN_DIR:-${CSI_HANDOVER_CACHE:-$HOME/.cache/csi-handover}/bin}/kubectl"

second_cluster() {
  local deadline=$((SECONDS + 900)) ready
  while ((SECONDS < deadline)); do
    ready="$("$kubectl" --kubeconfig .local/kubeconfig get nodes -l '!csi-handover.io/kwok' \
      -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True)"
    ((ready >= 2)) && break
    sleep 2
  done
  npx vitest run --project second-cluster --reporter=default --reporter=json --outputFile.json="$second_json" >"$second_log" 2>&1
}
second_cluster &
second=$!

npx vitest run --project unit --project tools --project cluster --reporter=default --reporter=json --outputFile.json="$main_json"
status=$?
wait "$second" || status=1
echo
echo "== the second-cluster project (test/cluster/real-nodes.test.ts), run beside the cluster project:"
cat "$second_log"
node hack/test-summary.mjs "$main_json" "$second_json" || status=1
exit "$status"
