#!/usr/bin/env bash
# Installs what a fresh machine of this kind lacks: the Debian tools the scripts use, the pinned Node.js
# and the npm packages. Safe to re-run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
need=()
# Real nodes: runc runs the containers, iptables serves kube-proxy inside each node, ip builds the node
# network, busybox is the test shell image; gcc builds the pause binary.
for tool in openssl:openssl unshare:util-linux nsenter:util-linux curl:curl npm:npm pgrep:procps \
    runc:runc iptables:iptables ip:iproute2 gcc:gcc; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
# The shell image copies /bin/busybox alone into an empty image: it must be the static build.
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
dpkg -s libc6-dev >/dev/null 2>&1 || need+=(libc6-dev)
if ((${#need[@]})); then
  echo "installing apt packages: ${need[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
node_bin="$("$root/hack/node.sh")"
export PATH="$node_bin:$PATH"
# Not `npm ci`: vite lists an optional dependency the registry does not serve, which npm leaves out of the
# lock file and `npm ci` then refuses. `npm install` installs exactly the locked versions all the same.
cd "$root" && npm install --no-audit --no-fund --loglevel=error
