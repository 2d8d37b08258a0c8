#!/usr/bin/env bash
# make test: what CI runs. The local cluster starts (30–40 s on a warm machine) while the code is type-checked and
# linted and the tests that need no cluster run (about as long together), then the cluster projects run against
# it. A cluster that was already running is used and left running, as the cluster tests' global setup does; one
# started here is stopped at the end.
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

rm -f .local/test-results-pure.json .local/test-results.json
checks=0
npx tsc --noEmit -p . || checks=1
npx eslint . || checks=1
npx prettier --check --log-level=warn '**/*.{ts,js,mjs}' || checks=1
# The tests that need no cluster too, while it is still starting.
pure=0
if [ "$checks" = 0 ]; then
  npx vitest run --project unit --project tools --reporter=default --reporter=json --outputFile.json=.local/test-results-pure.json || pure=1
fi

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

npx vitest run --project cluster --project second-cluster --reporter=default --reporter=json --outputFile.json=.local/test-results.json
status=$?
# Stopped before the summary: its last line, the plain "N passed, N failed", is what CI reads.
trap - EXIT
stop_cluster
node hack/test-summary.mjs .local/test-results-pure.json .local/test-results.json
summary=$?
[ "$status" = 0 ] && [ "$pure" = 0 ] && exit "$summary"
exit 1
