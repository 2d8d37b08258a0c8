#!/usr/bin/env bash
# make demo: starts the local cluster if needed and runs the demo (hack/demo.ts). The cluster stays up.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/hack/cluster.sh" up
cd "$root" && npx tsx hack/demo.ts
