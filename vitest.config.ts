import { defineConfig } from 'vitest/config';

// The storage probe is the benchmarks' and the demo's tool: tested where they run, not in make test (80 s).
const RELIABILITY = [
  'test/cluster/faults.test.ts',
  'test/cluster/soak.test.ts',
  'test/cluster/cert-rotation.test.ts',
  'test/cluster/reclaim.test.ts',
  'test/cluster/storage-probe.test.ts',
];

// real-nodes starts, uses and stops a throwaway second cluster of its own (its own state dir, ports and addresses).
// Its own project, so it is named apart; Vitest runs it like the cluster files, one file at a time, after them
// (a project of one-at-a-time files runs apart from every other), with the main cluster up throughout.
const SECOND_CLUSTER = ['test/cluster/real-nodes.test.ts'];

export default defineConfig({
  test: {
    projects: [
      // The pure files share one module graph (isolate: false): they keep no state between files, and loading zod,
      // pino and client-node once instead of per file halves their time (35 → 20 s on two busy cores).
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], isolate: false } },
      // No cluster, but the tools make bins builds: promtool, helm. They run while the cluster project's global setup
      // starts a control plane and two nodes on the same two cores, so a 0.2 s helm lint can take seconds.
      { test: { name: 'tools', include: ['test/tools/**/*.test.ts'], testTimeout: 60_000, isolate: false } },
      {
        test: {
          name: 'cluster',
          include: ['test/cluster/**/*.test.ts'],
          exclude: [...RELIABILITY, ...SECOND_CLUSTER],
          // One real cluster serves every cluster test file, one file at a time.
          globalSetup: ['test/cluster/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 300_000,
        },
      },
      { test: { name: 'second-cluster', include: SECOND_CLUSTER, fileParallelism: false, testTimeout: 300_000, hookTimeout: 300_000 } },
      {
        // The fault matrix, a short soak and certificate rotation (make test-reliability): a quarter of an hour on
        // the real cluster, kept out of make test so CI stays within its budget.
        test: {
          name: 'reliability',
          include: RELIABILITY,
          globalSetup: ['test/cluster/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
