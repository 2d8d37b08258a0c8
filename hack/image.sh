#!/usr/bin/env bash
# make image: the operator image, built on this machine without an engine or a registry, laid out as the
# Dockerfile lays it out (hack/images.sh: Node.js 24, dist/ and production dependencies only, user 65532, nothing
# written to its root filesystem), cached by content; prints its size, and imports it into the local cluster's
# nodes when the cluster runs (the next install or test rolls the operator onto it).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
line="$("$root/hack/images.sh" | grep '^csi-handover.local/csi-handover:')"
ref="${line%% *}" tar="${line#* }"
# A docker-archive tarball (hack/bins/images): its layers are gzipped tars.
unpacked=0
for layer in $(tar -tf "$tar" | grep '\.tar\.gz$'); do
  unpacked=$((unpacked + $(tar -xOf "$tar" "$layer" | gzip -dc | wc -c)))
done
echo "$ref"
echo "  $tar"
echo "  $(du -m "$tar" | cut -f1) MiB compressed, $((unpacked / 1048576)) MiB unpacked"
if "$root/hack/cluster.sh" running >/dev/null 2>&1; then
  "$root/hack/nodes.sh" images
  echo "  imported into the local cluster's nodes"
else
  echo "  (no local cluster running: make cluster-up imports it)"
fi
