#!/usr/bin/env bash
# Builds the real Kubernetes control plane, etcd and the CSI sidecars from Go modules into a cache outside
# the repo, keyed by the wrapper module's go.mod/go.sum. A warm cache makes this a no-op.
# Prints the bin directory on the last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CSI_HANDOVER_CACHE:-$HOME/.cache/csi-handover}"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "bins.sh: Go is needed to build the control plane and sidecars" >&2; exit 1; }

k8s_version=v1.36.3

# The key covers the wrapper module (go.mod, go.sum, any local Go source), the link flags and the Go version.
key_of() { (cd "$1" && find . -name "*.go" -o -name go.mod -o -name go.sum | sort | xargs cat; echo "$2"; go version) | sha256sum | cut -c1-16; }

# build_module <wrapper dir> <ldflags> <out-name=package>...
build_module() {
  local dir="$1" ldflags="$2"; shift 2
  local key out
  key="$(key_of "$dir" "$ldflags $*")"
  out="$cache/bins/$(basename "$dir")-$key"
  if [[ -f "$out/.complete" ]]; then echo "$(basename "$dir"): cached in $out" >&2; echo "$out"; return; fi
  mkdir -p "$out"
  local start=$SECONDS
  (cd "$dir" && go mod download)
  for spec in "$@"; do
    local name="${spec%%=*}" pkg="${spec#*=}"
    echo "building $name ($pkg)" >&2
    (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out/$name" "$pkg")
  done
  echo "$(basename "$dir"): built in $((SECONDS - start))s into $out" >&2
  touch "$out/.complete"
  echo "$out"
}

stamp="-X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$k8s_version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36"

k8s="$(build_module "$here/bins/kubernetes" "$stamp" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
  kubectl=k8s.io/kubernetes/cmd/kubectl)"

etcd="$(build_module "$here/bins/etcd" "" etcd=go.etcd.io/etcd/server/v3)"

sidecars="$(build_module "$here/bins/sidecars" "" \
  csi-attacher=github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher \
  csi-provisioner=github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner \
  csi-resizer=github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer \
  csi-snapshotter=github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter \
  snapshot-controller=github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller \
  csi-test-driver=./csi-test-driver)"

# One directory of symlinks, so callers need a single path.
bin="$cache/bin"
mkdir -p "$bin"
for d in "$k8s" "$etcd" "$sidecars"; do
  for f in "$d"/*; do ln -sfn "$f" "$bin/$(basename "$f")"; done
done
echo "binaries in $bin" >&2
echo "$bin"
