// The sidecars' own alpha gate ReleaseLeaderElectionOnExit, with csi-handover (standalone, OpenShift timings):
// a leader releases its leases itself on SIGTERM, csi-handover records `releasedBy: holder` and does nothing
// — and a standby, facts.md §1 inferred and this test observes, ignores SIGTERM until the SIGKILL.
import type { V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { PatchType } from '../../src/kube/http.js';
import { makeLogger } from '../../src/log.js';
import { handoversFrom } from '../../hack/bench/handovers.js';
import { LeaseRecorder, sigtermTimes } from '../../hack/bench/recorder.js';
import { clusterHttp, kubectl, nodeAgentEvents, SAMPLE_DEPLOYMENT, SAMPLE_DRIVER, SAMPLE_LEASES, SAMPLE_NAMESPACE as NS, samplesDir, waitFor } from '../../hack/lib/cluster.js';
import { installOperator, setOperatorMode } from '../../hack/lib/operator.js';
import { waitLeasesHeldBy, waitRolloutComplete } from '../../hack/lib/rollout.js';
import { join } from 'node:path';

const http = clusterHttp();
const leases = Object.values(SAMPLE_LEASES);
const crPath = `/apis/operator.openshift.io/v1/clustercsidrivers/${SAMPLE_DRIVER}`;
const SIDECARS = ['csi-provisioner', 'csi-attacher', 'csi-resizer', 'csi-snapshotter'];

async function settled(): Promise<{ pods: V1Pod[]; holders: Map<string, string> }> {
  const pods = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 300_000);
  const holders = await waitLeasesHeldBy(http, NS, leases, pods, 300_000);
  return { pods, holders };
}

async function deletePodAndWait(name: string): Promise<void> {
  await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${name}`);
  await waitFor(`${name} gone`, 120_000, async () => {
    try {
      await http.get(`/api/v1/namespaces/${NS}/pods/${name}`);
      return false;
    } catch {
      return true;
    }
  }, 250);
}

beforeAll(async () => {
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  await kubectl('apply', '-k', join(samplesDir, 'openshift-release-on-exit'));
  await http.request('POST', '/apis/operator.openshift.io/v1/clustercsidrivers', { body: {
    apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', metadata: { name: SAMPLE_DRIVER }, spec: { managementState: 'Managed', logLevel: 'Normal' },
  } }).catch(() => http.patch(crPath, { spec: { managementState: 'Managed', logLevel: 'Normal' } }, PatchType.merge));
  await settled();
});

describe('ReleaseLeaderElectionOnExit=true (OpenShift timings)', () => {
  it('a standby ignores SIGTERM and runs until SIGKILL at the end of the grace period', async () => {
    const { pods, holders } = await settled();
    const standby = pods.find((p) => ![...holders.values()].includes(p.metadata?.name ?? ''));
    expect(standby, 'a pod holding no lease').toBeDefined();
    const name = standby?.metadata?.name ?? '';
    await deletePodAndWait(name);
    const events = (await nodeAgentEvents()).filter((e) => e.pod === name);
    for (const c of SIDECARS) {
      const term = events.find((e) => e.container === c && e.event === 'signal' && e.signal === 'SIGTERM');
      const exit = events.find((e) => e.container === c && e.event === 'container-exited');
      console.log(`standby ${c}: SIGTERM ${term?.t}, exited ${exit?.t} by ${exit?.signal ?? `exit code ${exit?.exitCode}`}`);
      expect(exit?.signal, `${c} exit`).toBe('SIGKILL');
      expect(Date.parse(exit?.t ?? '') - Date.parse(term?.t ?? ''), `${c} ran through the grace period`).toBeGreaterThanOrEqual(29_000);
    }
  });

  it('a leader releases its leases itself; csi-handover records releasedBy holder and the handover is fast', async () => {
    const { pods, holders } = await settled();
    const leaderName = [...holders.values()][0] ?? '';
    expect(pods.map((p) => p.metadata?.name)).toContain(leaderName);
    const recorder = new LeaseRecorder(http, NS, new Set(leases), makeLogger('test', 'warn'));
    await recorder.start();
    try {
      await deletePodAndWait(leaderName);
      const after = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 120_000);
      await waitLeasesHeldBy(http, NS, leases, after, 120_000);
    } finally {
      recorder.stop();
    }
    const events = (await nodeAgentEvents()).filter((e) => e.pod === leaderName && e.event === 'container-exited' && SIDECARS.includes(e.container ?? ''));
    for (const e of events) console.log(`leader ${e.container}: exited ${e.t} with ${e.signal ?? `exit code ${e.exitCode}`}`);
    expect(events.every((e) => e.signal === null || e.signal === undefined)).toBe(true); // exited by itself, no SIGKILL
    const handovers = handoversFrom(recorder.observations, await sigtermTimes(NS)).filter((h) => h.oldHolder === leaderName);
    expect(handovers.map((h) => h.lease).sort()).toEqual([...leases].sort());
    for (const h of handovers) {
      console.log(`${h.lease}: released by its holder, ${(((h.gapMs ?? 0)) / 1000).toFixed(2)}s SIGTERM → new holder`);
      expect(h.releasedAt, `${h.lease} went through an empty holder`).toBeDefined();
      expect(h.gapMs ?? Infinity).toBeLessThan(10_000);
    }
    const reported = await waitFor('report', 30_000, async () => {
      const cr = await http.get<{ status?: { handover?: { lastRollout?: { leases?: { oldHolder: string; releasedBy: string }[] } } } }>(crPath);
      const ls = (cr.status?.handover?.lastRollout?.leases ?? []).filter((l) => (leases as string[]).includes((l as { lease?: string }).lease ?? ''));
      return ls.length === leases.length && ls.every((l) => l.oldHolder === leaderName) ? ls : undefined;
    });
    expect(reported.map((l) => l.releasedBy)).toEqual(leases.map(() => 'holder'));
  });
});
