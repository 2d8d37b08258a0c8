import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      // No cluster, but the tools make bins builds: promtool, helm.
      { test: { name: 'tools', include: ['test/tools/**/*.test.ts'] } },
      {
        test: {
          name: 'cluster',
          include: ['test/cluster/**/*.test.ts'],
          // One real cluster serves every cluster test file, one file at a time.
          globalSetup: ['test/cluster/global-setup.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 300_000,
        },
      },
    ],
  },
});
