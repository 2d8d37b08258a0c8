#!/usr/bin/env bash
# make bench-baseline: starts the local cluster if it is not running, runs the baseline, and stops the
# cluster again if it started it.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
started=0
if ! "$root/hack/cluster.sh" running; then
  "$root/hack/cluster.sh" up
  started=1
fi
trap '[[ $started == 1 && -z "${KEEP_CLUSTER:-}" ]] && "$root/hack/cluster.sh" down' EXIT
cd "$root" && npx tsx hack/bench/baseline.ts
