#!/usr/bin/env bash
# Builds the real Kubernetes control plane and node components (kubelet, kube-proxy), etcd, containerd, the
# CNI plugins, KWOK, the CSI sidecars and driver, the pause binary and the image tool into a cache outside the repo,
# keyed by what goes into each build. A warm cache makes this a no-op.
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

# build_module <wrapper dir> <ldflags> <out-name=package>...  (BUILD_TAGS: go build -tags)
build_module() {
  local dir="$1" ldflags="$2"; shift 2
  local key out tags="${BUILD_TAGS:-}"
  key="$(key_of "$dir" "$ldflags $tags $*")"
  out="$cache/bins/$(basename "$dir")-$key"
  if [[ -f "$out/.complete" ]]; then echo "$(basename "$dir"): cached in $out" >&2; echo "$out"; return; fi
  mkdir -p "$out"
  local start=$SECONDS
  (cd "$dir" && go mod download)
  for spec in "$@"; do
    local name="${spec%%=*}" pkg="${spec#*=}"
    echo "building $name ($pkg)" >&2
    (cd "$dir" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out/$name" "$pkg")
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
  kubectl=k8s.io/kubernetes/cmd/kubectl \
  kubelet=k8s.io/kubernetes/cmd/kubelet \
  kube-proxy=k8s.io/kubernetes/cmd/kube-proxy)"

etcd="$(build_module "$here/bins/etcd" "" etcd=go.etcd.io/etcd/server/v3)"

sidecars="$(build_module "$here/bins/sidecars" "" \
  csi-attacher=github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher \
  csi-provisioner=github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner \
  csi-resizer=github.com/kubernetes-csi/external-resizer/v2/cmd/csi-resizer \
  csi-snapshotter=github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter \
  snapshot-controller=github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller \
  csi-test-driver=./csi-test-driver)"

containerd_version=v2.4.2
containerd="$(BUILD_TAGS="no_btrfs no_devmapper no_zfs" build_module "$here/bins/containerd" \
  "-X github.com/containerd/containerd/v2/version.Version=$containerd_version" \
  containerd=github.com/containerd/containerd/v2/cmd/containerd \
  containerd-shim-runc-v2=github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  ctr=github.com/containerd/containerd/v2/cmd/ctr)"

cni="$(build_module "$here/bins/cni" "" \
  bridge=github.com/containernetworking/plugins/plugins/main/bridge \
  host-local=github.com/containernetworking/plugins/plugins/ipam/host-local \
  loopback=github.com/containernetworking/plugins/plugins/main/loopback \
  portmap=github.com/containernetworking/plugins/plugins/meta/portmap)"

images="$(build_module "$here/bins/images" "" imagetool=.)"

# KWOK plays the thousands of virtual nodes' pods of make bench-scale (stages: hack/kwok/).
kwok="$(build_module "$here/bins/kwok" "" kwok=sigs.k8s.io/kwok/cmd/kwok)"
# KWOK's own node stages (initialize, heartbeat with a node lease) and pod-ready, as its module ships them.
if [[ ! -f "$kwok/kwok-stages-upstream.yaml" ]]; then
  kwok_src="$(cd "$here/bins/kwok" && go mod download -json sigs.k8s.io/kwok | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/kustomize/stage"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml pod/fast/pod-ready.yaml; do
    cat "$kwok_src/$f"; echo "---"
  done >"$kwok/kwok-stages-upstream.yaml.tmp"
  mv "$kwok/kwok-stages-upstream.yaml.tmp" "$kwok/kwok-stages-upstream.yaml"
fi

# Helm v3 (the chart's lint and install tests).
helm_version=v3.22.0
# As Helm's Makefile stamps it: its version, and the Kubernetes version its client-go module is (lint and
# template check charts' kubeVersion against it when no cluster is asked).
helm_k8s_minor="$(sed -n 's/^\tk8s.io\/client-go v0\.\([0-9]*\)\..*/\1/p' "$here/bins/helm/go.mod")"
helm_stamp="-X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in lint/rules chartutil; do
  helm_stamp+=" -X helm.sh/helm/v3/pkg/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/$pkg.k8sVersionMinor=$helm_k8s_minor"
done
helm="$(build_module "$here/bins/helm" "$helm_stamp" helm=helm.sh/helm/v3/cmd/helm)"

# Prometheus and promtool (the alert rules' checks and the test that evaluates them against the operator): Debian's
# package, unpacked into the cache rather than installed, so no service or system user is created on the host.
prometheus_deb=2.42.0+ds-5+deb12u1
prometheus="$cache/bins/prometheus-$prometheus_deb"
if [[ ! -f "$prometheus/.complete" ]]; then
  tmp="$(mktemp -d)"
  (cd "$tmp" && { apt-get download -qq "prometheus=$prometheus_deb" 2>/dev/null \
    || { apt-get update -qq && apt-get download -qq "prometheus=$prometheus_deb"; }; }) \
    || { echo "bins.sh: Debian's prometheus $prometheus_deb could not be downloaded" >&2; exit 1; }
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
  mkdir -p "$prometheus"
  cp "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$prometheus/"
  rm -rf "$tmp"
  touch "$prometheus/.complete"
fi

# Upstream components the module proxy here may refuse: the module where it is served, else the released source
# kept beside the project (../shared/third_party, see its README), never a copy inside the repo.
third_party_dir() {
  local d origin
  for d in "${CSI_HANDOVER_THIRD_PARTY:-}" "$here/../../shared/third_party" \
      "$(origin="$(git -C "$here" remote get-url origin 2>/dev/null)" && [[ -d "$origin" ]] && echo "$origin/../shared/third_party")"; do
    [[ -n "$d" && -d "$d" ]] && { (cd "$d" && pwd); return; }
  done
  return 1
}

# build_upstream <module> <version> <third_party subdir> <out-name=package>...
build_upstream() {
  local module="$1" version="$2" subdir="$3"; shift 3
  local key out src tmp
  key="$(echo "$module $version $* $(go version)" | sha256sum | cut -c1-16)"
  out="$cache/bins/$(basename "$module")-$version-$key"
  if [[ -f "$out/.complete" ]]; then echo "$(basename "$module") $version: cached in $out" >&2; echo "$out"; return; fi
  local start=$SECONDS
  if src="$(GOFLAGS=-mod=mod go mod download -json "$module@$version" 2>/dev/null | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')" && [[ -n "$src" ]]; then
    echo "$(basename "$module") $version: from the Go module" >&2
  elif src="$(third_party_dir)/$subdir" && [[ -d "$src" ]]; then
    echo "$(basename "$module") $version: the module proxy refuses it; building the released source in $src" >&2
  else
    echo "bins.sh: $module $version is not served and no third_party/$subdir was found (set CSI_HANDOVER_THIRD_PARTY)" >&2
    exit 1
  fi
  # A private copy: the module cache is read-only and the shared directory must stay untouched.
  tmp="$(mktemp -d)" && cp -r "$src/." "$tmp" && chmod -R u+w "$tmp"
  mkdir -p "$out"
  for spec in "$@"; do
    echo "building ${spec%%=*} ($module $version)" >&2
    (cd "$tmp" && GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$out/${spec%%=*}" "${spec#*=}")
  done
  rm -rf "$tmp"
  echo "$(basename "$module") $version: built in $((SECONDS - start))s into $out" >&2
  touch "$out/.complete"
  echo "$out"
}

hostpath="$(build_upstream github.com/kubernetes-csi/csi-driver-host-path v1.18.0 csi-driver-host-path-v1.18.0 hostpathplugin=./cmd/hostpathplugin)"
registrar="$(build_upstream github.com/kubernetes-csi/node-driver-registrar v2.17.0 node-driver-registrar-v2.17.0 csi-node-driver-registrar=./cmd/csi-node-driver-registrar)"
livenessprobe="$(build_upstream github.com/kubernetes-csi/livenessprobe v2.19.0 livenessprobe-v2.19.0 livenessprobe=./cmd/livenessprobe)"
healthmonitor="$(build_upstream github.com/kubernetes-csi/external-health-monitor v0.18.0 external-health-monitor-v0.18.0 csi-external-health-monitor-controller=./cmd/csi-external-health-monitor-controller)"

# The pod sandbox's pause binary, from the Kubernetes module's own source (build/pause), static like upstream's.
pause_version=3.10.2
pause="$cache/bins/pause-$pause_version"
if [[ ! -f "$pause/.complete" ]]; then
  pause_src="$(cd "$here/bins/kubernetes" && go mod download -json k8s.io/kubernetes | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/build/pause/linux/pause.c"
  mkdir -p "$pause"
  gcc -Os -Wall -Werror -static -DVERSION="v$pause_version" -o "$pause/pause" "$pause_src"
  touch "$pause/.complete"
fi

# CRI-O for the second node (hack/bins-crio.sh), patched so conmon can have its own cgroup on cgroup v1 with
# cgroupfs (OpenShift's layout, which stock 1.36.3 fails on such a host: see the patch).
crio="$(CRIO_CONMON_CGROUP_PATCH=1 "$here/bins-crio.sh" | tail -1)"

# One directory of symlinks, so callers need a single path.
bin="$cache/bin"
mkdir -p "$bin"
for d in "$k8s" "$etcd" "$sidecars" "$containerd" "$cni" "$images" "$kwok" "$hostpath" "$registrar" "$livenessprobe" "$healthmonitor" "$pause" "$helm" "$prometheus" "$crio"; do
  for f in "$d"/*; do ln -sfn "$f" "$bin/$(basename "$f")"; done
done
echo "binaries in $bin" >&2
echo "$bin"
