#!/usr/bin/env bash
# Builds the local cluster's container images without a registry or an engine: one OCI image per component,
# from the cached binaries (hack/bins.sh), tagged with the real upstream names so the manifests read like
# production ones, plus the pause image, a busybox shell image for tests and the operator's own image (laid out
# as the Dockerfile lays it out). Each tarball is cached under ~/.cache/csi-handover/images, keyed by its inputs.
# Prints "<reference> <tarball>" per image; hack/nodes.sh imports them into every node's containerd.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${CSI_HANDOVER_CACHE:-$HOME/.cache/csi-handover}"
bin="${CSI_HANDOVER_BIN_DIR:-$("$root/hack/bins.sh")}"
out="$cache/images"
mkdir -p "$out"

# The shared libraries a host program loads, as -add flags (for images that need mount, tar, node).
libs_of() {
  local lib
  for lib in $(ldd "$@" 2>/dev/null | grep -oE '/[^ ]+\.so[^ ]*' | sort -u); do echo "-add $lib=$lib"; done
}
with_libs() { local f; for f in "$@"; do echo "-add $f=$f"; done; libs_of "$@"; }

# image <reference> <key material> <imagetool flags...>: builds unless the tarball for this key exists.
image() {
  local ref="$1" material="$2"; shift 2
  local key tar
  key="$(printf '%s\n' "$ref" "$material" "$@" | sha256sum | cut -c1-16)"
  tar="$out/$(echo "${ref##*/}" | tr ':' '-')-$key.tar"
  if [[ ! -f "$tar" ]]; then
    "$bin/imagetool" -tag "$ref" -out "$tar.partial" "$@"
    mv "$tar.partial" "$tar"
    echo "built $ref" >&2
  fi
  echo "$ref $tar"
}

# binary_image <reference> <binary> [user]: a static Go binary as the entrypoint, like upstream's distroless images.
binary_image() {
  local real; real="$(readlink -f "$bin/$2")"
  image "$1" "$real" -add "/$2=$real" -entrypoint "/$2" ${3:+-user "$3"}
}

binary_image registry.k8s.io/pause:3.10.2 pause 65535:65535
binary_image registry.k8s.io/sig-storage/csi-attacher:v4.12.0 csi-attacher
binary_image registry.k8s.io/sig-storage/csi-provisioner:v6.3.0 csi-provisioner
binary_image registry.k8s.io/sig-storage/csi-resizer:v2.2.0 csi-resizer
binary_image registry.k8s.io/sig-storage/csi-snapshotter:v8.6.0 csi-snapshotter
binary_image registry.k8s.io/sig-storage/snapshot-controller:v8.6.0 snapshot-controller
binary_image registry.k8s.io/sig-storage/csi-external-health-monitor-controller:v0.18.0 csi-external-health-monitor-controller
binary_image registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.17.0 csi-node-driver-registrar
binary_image registry.k8s.io/sig-storage/livenessprobe:v2.19.0 livenessprobe
# The stateless controller plugin the sample driver runs while the hostpath driver cannot serve two replicas.
binary_image csi-handover.local/csi-test-driver:v0.1.0 csi-test-driver
# A client-go leader elector whose identity is `<hostname>_<uuid>` (as kube-controller-manager's and many
# operators'), for the test of such holders.
binary_image registry.k8s.io/kube-scheduler:v1.36.3 kube-scheduler

# hostpathplugin execs mount/umount (bind mounts), findmnt (volume health) and tar+gzip (snapshots): upstream's
# image is alpine with util-linux and tar; here the same programs come from the host's Debian packages.
tools=(/usr/bin/mount /usr/bin/umount /usr/bin/findmnt /usr/bin/tar /usr/bin/gzip)
hostpath="$(readlink -f "$bin/hostpathplugin")"
# shellcheck disable=SC2046
image registry.k8s.io/sig-storage/hostpathplugin:v1.18.0 "$hostpath $(sha256sum "${tools[@]}" | cut -c1-64 | xargs)" \
  -add "/hostpathplugin=$hostpath" $(with_libs "${tools[@]}") -entrypoint /hostpathplugin

# A shell for tests: Debian's static busybox with the applets the tests call.
shell_dir="$out/shell-root"
if [[ ! -d "$shell_dir" ]]; then
  mkdir -p "$shell_dir.partial/bin"
  cp /bin/busybox "$shell_dir.partial/bin/busybox"
  for a in sh sleep cat echo ls true date wget nc kill grep; do ln -s busybox "$shell_dir.partial/bin/$a"; done
  mv "$shell_dir.partial" "$shell_dir"
fi
image csi-handover.local/shell:v1 "$(sha256sum /bin/busybox | cut -c1-64)" -add "/bin=$shell_dir/bin"

# The operator, as the Dockerfile lays it out: Node.js 24, dist/ from tsc, production node_modules, user 65532.
node="$(readlink -f "$("$root/hack/node.sh")/node")"
op_key="$( (cd "$root" && cat package.json package-lock.json tsconfig.json tsconfig.build.json && find src -type f | sort | xargs cat; echo "$node") | sha256sum | cut -c1-16)"
op_dir="$out/operator-$op_key"
if [[ ! -d "$op_dir" ]]; then
  stage="$(mktemp -d)"
  mkdir -p "$stage/app"
  cp "$root/package.json" "$root/package-lock.json" "$stage/app/"
  (cd "$root" && PATH="$(dirname "$node"):$PATH" npx tsc -p tsconfig.build.json --outDir "$stage/app/dist") >&2 \
    || { echo "images.sh: the operator does not compile (above)" >&2; rm -rf "$stage"; exit 1; }
  PATH="$(dirname "$node"):$PATH" npm install --prefix "$stage/app" --omit=dev --no-audit --no-fund --loglevel=error >/dev/null
  rm -f "$stage/app/package-lock.json"
  [[ -f "$stage/app/dist/src/main.js" && -d "$stage/app/node_modules/pino" && ! -e "$stage/app/node_modules/@kubernetes/client-node" ]] \
    || { echo "images.sh: the operator build left no dist/src/main.js, no production node_modules, or a dev dependency in $stage" >&2; exit 1; }
  mv "$stage" "$op_dir"
fi
# shellcheck disable=SC2046
image csi-handover.local/csi-handover:dev "$op_key" -add "/app=$op_dir/app" -add "/usr/local/bin/node=$node" \
  $(libs_of "$node") -env NODE_ENV=production -workdir /app -user 65532:65532 \
  -entrypoint node -entrypoint dist/src/main.js
