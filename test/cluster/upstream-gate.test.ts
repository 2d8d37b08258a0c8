// The sidecars' own alpha gate ReleaseLeaderElectionOnExit, with csi-handover (standalone, OpenShift timings):
// a leader releases its leases itself on SIGTERM, csi-handover records `releasedBy: holder` and does nothing
// — and a standby, facts.md §1 inferred and this test observes, ignores SIGTERM until the SIGKILL. The health
// monitor (v0.18.0) has no such flag at all: its lease is released by csi-handover once its holder is dead.
import type { V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeLogger } from '../../src/log.js';
import { handoversFrom } from '../../hack/bench/handovers.js';
import { LeaseRecorder, sigtermTimes } from '../../hack/bench/recorder.js';
import {
  applyKustomization,
  clusterHttp,
  nodeEvents,
  SAMPLE_DEPLOYMENT,
  SAMPLE_DRIVER,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE as NS,
  samplesDir,
  waitFor,
} from '../../hack/lib/cluster.js';
import { installOperator, reportStatus, setOperatorMode, setSampleCrLevel } from '../../hack/lib/operator.js';
import { waitLeasesHeldBy, waitRolloutComplete } from '../../hack/lib/rollout.js';
import { join } from 'node:path';

const http = clusterHttp();
const leases = Object.values(SAMPLE_LEASES);
/** The sidecars that take --feature-gates=ReleaseLeaderElectionOnExit=true in this overlay. */
const GATED_SIDECARS = ['csi-provisioner', 'csi-attacher', 'csi-resizer', 'csi-snapshotter'] as const;
const gatedLeases = new Set<string>(GATED_SIDECARS.map((c) => SAMPLE_LEASES[c]));
/**
 * The pods' grace period here, for the base's 30 s: a standby runs through all of it (the first test), and so does
 * the next rollout of these pods (the next file's), so a shorter one shows the same and spends less.
 */
const GRACE_S = 10;

async function settled(): Promise<{ pods: V1Pod[]; holders: Map<string, string> }> {
  const pods = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 300_000);
  const holders = await waitLeasesHeldBy(http, NS, leases, pods, 300_000);
  return { pods, holders };
}

async function deletePodAndWait(name: string): Promise<void> {
  await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${name}`);
  await waitFor(
    `${name} gone`,
    120_000,
    async () => {
      try {
        await http.get(`/api/v1/namespaces/${NS}/pods/${name}`);
        return false;
      } catch {
        return true;
      }
    },
    250,
  );
}

beforeAll(async () => {
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  // The base sets 30 s on each Deployment, so the next file's apply of another overlay puts it back.
  await applyKustomization(join(samplesDir, 'openshift-release-on-exit'), (o) => {
    if (o.kind === 'Deployment' && o.spec?.template?.spec) o.spec.template.spec.terminationGracePeriodSeconds = GRACE_S;
  });
  await setSampleCrLevel(http, 'Normal');
  await settled();
});

/** The gated sidecars of `pod` that lead (hold their lease), given lease → holder. */
const leadingIn = (pod: string, holders: Map<string, string>) => GATED_SIDECARS.filter((c) => holders.get(SAMPLE_LEASES[c]) === pod);

// Each sidecar elects its own leader, so a pod is typically leader for some sidecars and standby for the others:
// the expectations are per container.
describe('ReleaseLeaderElectionOnExit=true (OpenShift timings)', () => {
  it('a standby sidecar ignores SIGTERM and runs until SIGKILL at the end of the grace period', async () => {
    const { pods, holders } = await settled();
    const names = pods.map((p) => p.metadata?.name ?? '');
    // The pod leading the fewest gated sidecars: with 2 pods and 4 leases, at least 2 of its sidecars are standbys.
    const name = [...names].sort((a, b) => leadingIn(a, holders).length - leadingIn(b, holders).length)[0] ?? '';
    const standbys = GATED_SIDECARS.filter((c) => !leadingIn(name, holders).includes(c));
    expect(standbys.length).toBeGreaterThanOrEqual(2);
    await deletePodAndWait(name);
    const events = (await nodeEvents()).filter((e) => e.pod === name);
    for (const c of standbys) {
      const term = events.find((e) => e.container === c && e.event === 'signal' && e.signal === 'SIGTERM');
      const exit = events.find((e) => e.container === c && e.event === 'container-exited');
      console.log(`standby ${c}: SIGTERM ${term?.t}, exited ${exit?.t} by ${exit?.signal ?? `exit code ${exit?.exitCode}`}`);
      expect(exit?.signal, `${c} exit`).toBe('SIGKILL');
      expect(Date.parse(exit?.t ?? '') - Date.parse(term?.t ?? ''), `${c} ran through the grace period`).toBeGreaterThanOrEqual((GRACE_S - 1) * 1000);
    }
  });

  it('a leader releases its leases itself; csi-handover records releasedBy holder, releases the health monitor’s, and every handover is fast', async () => {
    const { pods, holders } = await settled();
    const names = pods.map((p) => p.metadata?.name ?? '');
    // The pod leading the most gated sidecars (at least 2 of 4).
    const leaderName = [...names].sort((a, b) => leadingIn(b, holders).length - leadingIn(a, holders).length)[0] ?? '';
    const leading = leadingIn(leaderName, holders);
    const held = leases.filter((l) => holders.get(l) === leaderName);
    expect(leading.length).toBeGreaterThanOrEqual(2);
    const recorder = new LeaseRecorder(http, NS, new Set(leases), makeLogger('test', 'warn'));
    await recorder.start();
    try {
      await deletePodAndWait(leaderName);
      const after = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 120_000);
      await waitLeasesHeldBy(http, NS, leases, after, 120_000);
    } finally {
      recorder.stop();
    }
    const exits = (await nodeEvents()).filter(
      (e) => e.pod === leaderName && e.event === 'container-exited' && (leading as readonly string[]).includes(e.container ?? ''),
    );
    for (const e of exits) console.log(`leader ${e.container}: exited ${e.t} with ${e.signal ?? `exit code ${e.exitCode}`}`);
    expect(exits.map((e) => e.container).sort()).toEqual([...leading].sort());
    expect(exits.every((e) => e.signal === null || e.signal === undefined)).toBe(true); // exited by itself, no SIGKILL
    const handovers = handoversFrom(recorder.observations, await sigtermTimes(NS)).filter((h) => h.oldHolder === leaderName);
    expect(handovers.map((h) => h.lease).sort()).toEqual([...held].sort());
    for (const h of handovers) {
      console.log(`${h.lease}: ${((h.gapMs ?? 0) / 1000).toFixed(2)}s SIGTERM → new holder`);
      expect(h.releasedAt, `${h.lease} went through an empty holder`).toBeDefined();
      expect(h.gapMs ?? Infinity).toBeLessThan(10_000);
    }
    const reported = await waitFor('report', 30_000, async () => {
      const ls = ((await reportStatus(http, SAMPLE_DRIVER))?.lastRollout?.leases ?? []).filter((l) => l.oldHolder === leaderName);
      return ls.length === held.length ? ls : undefined;
    });
    for (const l of reported) {
      expect(l.releasedBy, l.lease).toBe(gatedLeases.has(l.lease) ? 'holder' : 'operator');
    }
  });
});
