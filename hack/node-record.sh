#!/usr/bin/env bash
# Runs hack/node-record.ts (a real node's record of its containers) on the project's pinned Node.js.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
exec "$("$root/hack/node.sh")/node" --import tsx "$root/hack/node-record.ts" "$@"
