#!/usr/bin/env bash
# What the node agent runs for the image csi-handover.local/csi-handover: the operator from this checkout,
# on the pinned Node.js, as the container image would (see Dockerfile), without building an image.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# A container's environment has no HOME; the cached Node.js lives under the user's home.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cd "$root"
node="$("$root/hack/node.sh")/node"
# CSI_HANDOVER_RUN=compiled runs the tsc output as the image does (make bench-scale measures memory so:
# the TypeScript loader costs some 30–45 MiB of RSS by itself); the default runs the sources as they are.
if [[ "${CSI_HANDOVER_RUN:-}" == compiled ]]; then
  [[ -f "$root/dist/src/main.js" ]] || { echo "CSI_HANDOVER_RUN=compiled: no dist/src/main.js; run make build" >&2; exit 1; }
  exec "$node" "$root/dist/src/main.js" "$@"
fi
exec "$node" --import tsx "$root/src/main.ts" "$@"
