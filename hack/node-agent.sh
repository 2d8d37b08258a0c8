#!/usr/bin/env bash
# Runs the node agent (TypeScript, through tsx) on the project's pinned Node.js.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
exec "$("$root/hack/node.sh")/node" --import tsx "$root/hack/node-agent/main.ts" "$@"
