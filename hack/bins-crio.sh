#!/usr/bin/env bash
# Builds what a node needs to run on CRI-O + conmon instead of containerd: crio and copyimg (CRI-O's own test
# tool that writes an image tarball into CRI-O's containers-storage, the way `ctr images import` does for
# containerd) from github.com/cri-o/cri-o, crictl from sigs.k8s.io/cri-tools (wrapper module hack/bins/crio),
# and pinns (CRI-O's namespace pinner, C, static) from the same module's source with gcc.
# conmon and runc are Debian's (conmon, gcc and libc6-dev are installed here if missing).
#
# CRIO_CONMON_CGROUP_PATCH=1 builds crio from a private copy of the module's source with
# hack/bins/crio/patches/conmon-cgroupfs-v1.patch applied (and the module's own go.mod pins): without it,
# CRI-O 1.36 on cgroup v1 + cgroupfs fails every container create when infra_ctr_cpuset is set with
# monitor_cgroup = "pod" (see the patch). `crio version` then says GitTreeState: dirty.
#
# Cached like hack/bins.sh, in ~/.cache/csi-handover/bins/crio-<key>/, keyed by the wrapper module (and its
# patches), the build tags, the link flags, pinns' compiler flags, the patch switch and the Go and gcc
# versions; a warm cache is a no-op. Prints the bin directory on the last line of stdout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${CSI_HANDOVER_CACHE:-$HOME/.cache/csi-handover}"
wrapper="$here/bins/crio"
patch_conmon="${CRIO_CONMON_CGROUP_PATCH:-0}"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
command -v go >/dev/null || export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || { echo "bins-crio.sh: Go is needed to build CRI-O" >&2; exit 1; }

# Debian's packages: conmon (CRI-O's container monitor, 2.1.6 in bookworm), and gcc + libc6-dev for pinns.
need=()
command -v conmon >/dev/null || need+=(conmon)
command -v gcc >/dev/null || need+=(gcc)
dpkg -s libc6-dev >/dev/null 2>&1 || need+=(libc6-dev)
if ((${#need[@]})); then
  echo "bins-crio.sh: installing Debian's ${need[*]}" >&2
  apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
  apt_install || { apt-get update -qq >&2 && apt_install; } \
    || { echo "bins-crio.sh: could not install ${need[*]}" >&2; exit 1; }
fi
command -v runc >/dev/null || { echo "bins-crio.sh: runc (Debian's, as the containerd nodes use) is missing" >&2; exit 1; }

# Without cgo: no seccomp, no btrfs/zfs graph drivers (overlay only), pure-Go OpenPGP for signature policies.
tags="containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_zfs"
# pinns as CRI-O's pinns/Makefile builds it (static), linked and stripped in one go.
pinns_cflags="-std=c99 -O3 -Wall -Werror -Wextra -static -s"

key="$( (cd "$wrapper" && find . -name "*.go" -o -name go.mod -o -name go.sum -o -name "*.patch" | sort | xargs cat
  echo "$tags" "$pinns_cflags" "patch_conmon=$patch_conmon"; go version; gcc --version | head -1) | sha256sum | cut -c1-16)"
out="$cache/bins/crio-$key"
if [[ -f "$out/.complete" ]]; then echo "crio: cached in $out" >&2; echo "$out"; exit 0; fi

start=$SECONDS
mkdir -p "$out"
(cd "$wrapper" && go mod download)
# mod_field <module> <Dir|Version>: from `go mod download -json`; mod_info <module> <Hash|Time>: from its .info
# (the origin the module proxy recorded: the tag's commit and time), for the version stamps.
mod_field() { (cd "$wrapper" && go mod download -json "$1") | sed -n "s/^\t\"$2\": \"\(.*\)\",\{0,1\}$/\1/p"; }
mod_info() { sed -n "s/.*\"$2\":\"\([^\"]*\)\".*/\1/p" "$(mod_field "$1" Info)"; }
crio_src="$(mod_field github.com/cri-o/cri-o Dir)"
crio_commit="$(mod_info github.com/cri-o/cri-o Hash)"
crio_date="$(mod_info github.com/cri-o/cri-o Time)"
crictl_version="$(mod_field sigs.k8s.io/cri-tools Version)"

# CRI-O's version is a constant in internal/version; its Makefile stamps only the commit and build date.
crio_stamp() {
  local s="-X github.com/cri-o/cri-o/internal/version.buildCommit=${crio_commit:-$(mod_field github.com/cri-o/cri-o Version)}$1"
  [[ -n "$crio_date" ]] && s+=" -X github.com/cri-o/cri-o/internal/version.buildDate=$crio_date"
  echo "$s"
}
specs=(copyimg=github.com/cri-o/cri-o/test/copyimg crictl=sigs.k8s.io/cri-tools/cmd/crictl)
[[ "$patch_conmon" == 1 ]] || specs=(crio=github.com/cri-o/cri-o/cmd/crio "${specs[@]}")
for spec in "${specs[@]}"; do
  name="${spec%%=*}" pkg="${spec#*=}"
  case "$name" in
    crictl) ldflags="-X sigs.k8s.io/cri-tools/pkg/version.Version=${crictl_version#v}" ;;
    *) ldflags="$(crio_stamp "")" ;;
  esac
  echo "building $name ($pkg)" >&2
  t=$SECONDS
  (cd "$wrapper" && go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out/$name" "$pkg")
  echo "built $name in $((SECONDS - t))s" >&2
done
if [[ "$patch_conmon" == 1 ]]; then
  # A private copy: the module cache is read-only. Built with the module's own go.mod and go.sum.
  tmp="$(mktemp -d)" && cp -r "$crio_src/." "$tmp" && chmod -R u+w "$tmp"
  patch -s -d "$tmp" -p1 <"$wrapper/patches/conmon-cgroupfs-v1.patch"
  echo "building crio (github.com/cri-o/cri-o/cmd/crio + patches/conmon-cgroupfs-v1.patch)" >&2
  t=$SECONDS
  (cd "$tmp" && GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -tags "$tags" \
    -ldflags "-s -w $(crio_stamp -dirty)" -o "$out/crio" ./cmd/crio)
  rm -rf "$tmp"
  echo "built crio in $((SECONDS - t))s" >&2
fi
echo "building pinns ($crio_src/pinns)" >&2
# shellcheck disable=SC2086
gcc $pinns_cflags -o "$out/pinns" "$crio_src"/pinns/src/*.c
echo "crio: built in $((SECONDS - start))s into $out" >&2
touch "$out/.complete"
echo "$out"
