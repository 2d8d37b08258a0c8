# csi-handover — every entry point. Each target installs what it needs (apt packages, the pinned Node.js,
# npm packages, the Go-built control plane and sidecars, cached under ~/.cache/csi-handover).
SHELL := /bin/bash
.DEFAULT_GOAL := help
NODE_BIN := $(shell hack/node.sh 2>/dev/null)
export PATH := $(NODE_BIN):$(PATH)
export KUBECONFIG := $(CURDIR)/.local/kubeconfig

.PHONY: help deps bins image cluster-up cluster-down test test-unit test-cluster test-reliability lint format demo bench bench-baseline bench-failover bench-kubelet bench-race bench-scale bench-cache bench-image bench-witness soak typecheck build clean

help:
	@echo "make demo            the whole story on a local cluster"
	@echo "make test            everything CI runs (unit + real-cluster tests)"
	@echo "make test-unit       tests that need no cluster (seconds)"
	@echo "make test-reliability  the fault matrix, a short soak, webhook certificate rotation and a killed cluster reclaimed, the storage probe of the benchmarks, on the real cluster (not in make test)"
	@echo "make lint            ESLint (typescript-eslint, type-checked) and Prettier's check; make format rewrites"
	@echo "make bins            build/cached control plane, etcd and CSI sidecars"
	@echo "make image           the operator image (as the Dockerfile lays it out), imported into the local nodes"
	@echo "make cluster-up|cluster-down   the local control plane and two real nodes"
	@echo "make bench           every way of handing over × timings × replicas: gaps, rollout, storage stalls (BENCH_RUNS)"
	@echo "make bench-baseline  rollout handover gaps without csi-handover"
	@echo "make bench-failover  the operator's own leader failover, graceful and crash"
	@echo "make bench-kubelet   what a real kubelet reports, and when, through a pod's start and graceful deletion"
	@echo "make bench-race      companion mode's race: did the new pod try the lease before its release? (RACE_ROLLOUTS)"
	@echo "make bench-scale     the operator against 5,000 pods and 1,000 leases while handovers happen (SCALE_* vars)"
	@echo "make bench-image     how fast the operator image starts on a real node: created, started, serving, Ready"
	@echo "make soak            SOAK_ROLLOUTS rollouts with faults drawn at random, an independent observer checking the invariants"
	@echo "make bench-witness  what the node witness costs per node: RSS and CPU, idle and through rollouts"
	@echo "make bench-cache     heap per cached pod and node: as served, without managedFields, as the engine keeps them"

deps: .local/.deps-ok
.local/.deps-ok: package.json package-lock.json hack/deps.sh
	hack/deps.sh
	@mkdir -p .local && touch $@

bins: deps
	hack/bins.sh

image: deps bins
	hack/image.sh

typecheck: deps
	npx tsc --noEmit -p .

lint: deps
	npx eslint .
	npx prettier --check --log-level=warn '**/*.{ts,js,mjs}'

format: deps
	npx prettier --write --log-level=warn '**/*.{ts,js,mjs}'

build: deps
	npx tsc -p .

test-unit: deps
	npx vitest run --project unit

test-cluster: deps bins
	npx vitest run --project cluster --project second-cluster

# The fault matrix, a short soak, webhook certificate rotation and a killed cluster reclaimed, on the real cluster: not in make test.
test-reliability: deps bins
	npx vitest run --project reliability

# Type check and lint while the cluster starts, then every project; the last line is the summary CI reads.
test: deps bins
	hack/test.sh

cluster-up: deps
	hack/cluster.sh up

cluster-down:
	hack/cluster.sh down

demo: deps bins
	hack/demo.sh

bench: deps bins
	hack/cluster.sh up
	npx tsx hack/bench/bench.ts

bench-baseline: deps bins
	hack/bench/baseline.sh

bench-failover: deps bins
	hack/cluster.sh up
	npx tsx hack/bench/failover.ts

bench-kubelet: deps bins
	hack/cluster.sh up
	npx tsx hack/bench/kubelet-timeline.ts

soak: deps bins image
	hack/cluster.sh up
	npx tsx hack/bench/soak.ts

bench-race: deps bins
	hack/cluster.sh up
	npx tsx hack/bench/race.ts

# 5,000 virtual pods: real containers cannot serve that on this machine, so KWOK plays them on fake nodes
# beside the real ones (where the operator runs).
bench-scale: deps bins
	CSI_HANDOVER_KWOK_NODES=2 hack/cluster.sh up
	npx tsx hack/bench/scale.ts

bench-image: deps bins
	hack/cluster.sh up
	npx tsx hack/bench/image-start.ts

bench-cache: deps
	node --expose-gc --import tsx hack/bench/cache-size.ts

bench-witness: deps bins
	hack/cluster.sh up
	npx tsx hack/bench/witness-cost.ts

clean:
	hack/cluster.sh wipe || true
	rm -rf dist .local
