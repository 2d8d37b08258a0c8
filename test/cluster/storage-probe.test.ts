// The storage probe of make bench and make demo, on the real sidecars: every kind of operation completes in a
// steady state, a stock rollout shows up as a stall of every kind, and the probe removes all it created.
// make test-reliability runs it, beside the benchmarks' other long runs.
import { beforeAll, describe, expect, it } from 'vitest';
import { settle } from '../../hack/bench/measure-rollout.js';
import { PROBE_KINDS, probeStats } from '../../src/report/probe-stats.js';
import { probedRollout, StorageProbe } from '../../hack/bench/storage-probe.js';
import { clusterHttp, SAMPLE_DEPLOYMENT, SAMPLE_NAMESPACE as NS, waitFor } from '../../hack/lib/cluster.js';
import { rolloutRestart } from '../../hack/lib/rollout.js';
import { makeLogger } from '../../src/log.js';

const http = clusterHttp();
const log = makeLogger('test', 'warn');
const runId = (what: string) => `test-${what}-${Date.now().toString(36)}`;

// Settling may outlast the default hook timeout: after an OpenShift-timing test file, the driver's and the
// snapshot controller's leases may each have to expire (137s plus a poll).
beforeAll(async () => {
  await settle(http, 'upstream-1replica', log); // stock sidecars, no operator
}, 600_000);

describe('storage probe', () => {
  it('sees every kind of operation complete, and leaves nothing behind', async () => {
    const probe = new StorageProbe(http, log, runId('steady'), { intervalMs: 500, snapshotEvery: 2 });
    await probe.prepare();
    try {
      await probe.start();
      await waitFor(
        'two completed operations of each kind',
        120_000,
        () => PROBE_KINDS.every((k) => probe.ops.filter((o) => o.kind === k && o.doneAt !== undefined).length >= 2),
        250,
      );
      await probe.stop();
      const stats = probeStats(probe.ops, probe.endedAt ?? Date.now());
      expect(stats.map((s) => s.kind)).toEqual([...PROBE_KINDS]);
      for (const s of stats) {
        expect(s.unfinished, `${s.kind} unfinished`).toBe(0);
        expect(s.completed, `${s.kind} completed`).toBe(s.submitted);
      }
    } finally {
      await probe.cleanup();
    }
    expect(await probe.leftovers()).toEqual([]);
  });

  it('a stock rollout (upstream timings, 1 replica) stalls every kind for about a lease expiry', async () => {
    const r = await probedRollout(http, 'upstream-1replica', log, runId('stock'), () => rolloutRestart(http, NS, SAMPLE_DEPLOYMENT));
    for (const s of r.stats) {
      console.log(`${s.kind}: ${s.submitted} submitted, stall ${(s.stallMs / 1000).toFixed(1)}s, longest wait ${(s.longestWaitMs / 1000).toFixed(1)}s`);
      // No leader for at least the 15s lease duration (the old leader never releases): nothing completes.
      expect(s.stallMs, `${s.kind} stall`).toBeGreaterThanOrEqual(10_000);
      expect(s.unfinished, `${s.kind} unfinished`).toBe(0);
    }
  });
});
