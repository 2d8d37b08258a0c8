#!/usr/bin/env bash
# What the node agent runs for the image csi-handover.local/csi-handover: the operator from this checkout,
# on the pinned Node.js, as the container image would (see Dockerfile), without building an image.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# A container's environment has no HOME; the cached Node.js lives under the user's home.
export HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
cd "$root"
exec "$("$root/hack/node.sh")/node" --import tsx "$root/src/main.ts" "$@"
