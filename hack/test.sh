#!/usr/bin/env bash
# make test: what CI runs. The local cluster starts while the code is type-checked and linted (each takes about a
# minute and mostly one of the two cores), then every project runs against it. A cluster that was already running
# is used and left running, as the cluster tests' global setup does; one started here is stopped at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .local

started=""
cluster_pid=""
if ! hack/cluster.sh running 2>/dev/null; then
  started=1
  # Its output goes to a file while the checks print theirs, and is shown after them.
  (hack/cluster.sh wipe && hack/cluster.sh up) >.local/cluster-up.log 2>&1 &
  cluster_pid=$!
fi
stop_cluster() {
  if [ -n "$cluster_pid" ]; then wait "$cluster_pid" 2>/dev/null; fi
  if [ -n "$started" ] && [ -z "${KEEP_CLUSTER:-}" ]; then hack/cluster.sh down; fi
}
trap stop_cluster EXIT

checks=0
npx tsc --noEmit -p . || checks=1
npx eslint . || checks=1
npx prettier --check --log-level=warn '**/*.{ts,js,mjs}' || checks=1

if [ -n "$cluster_pid" ]; then
  wait "$cluster_pid"
  up=$?
  cluster_pid=""
  cat .local/cluster-up.log
  if [ "$up" != 0 ]; then
    echo "the local cluster did not start (exit $up): its log is above" >&2
    exit "$up"
  fi
fi
[ "$checks" = 0 ] || { echo "type check or lint failed: see above" >&2; exit 1; }

npx vitest run --project unit --project tools --project cluster --project second-cluster --reporter=default --reporter=json --outputFile.json=.local/test-results.json
status=$?
# Stopped before the summary: its last line, the plain "N passed, N failed", is what CI reads.
trap - EXIT
stop_cluster
node hack/test-summary.mjs .local/test-results.json
exit $status
