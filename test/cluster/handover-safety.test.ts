// Safety: a lease is released only for a holder proven dead. With the nodes' fault switches, the
// operator must not release for a force-deleted pod, a pod on a partitioned node, or a pod whose node's kubelet
// or runtime (containerd on one node, CRI-O on the other) is down while it is deleted; in each case the lease changes hands only after the old holder's
// processes are gone (the node records when they exited). The node witness runs throughout: its evidence must
// change none of that (it sees the processes run on, and the operator does not trust it for a force deletion).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeLogger } from '../../src/log.js';
import { LeaseRecorder } from '../../hack/bench/recorder.js';
import {
  clusterHttp,
  kubectl,
  nodeComponent,
  nodeEvents,
  nodeRuntimes,
  SAMPLE_DEPLOYMENT,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE as NS,
  setPartitioned,
  waitFor,
} from '../../hack/lib/cluster.js';
import {
  installOperator,
  installWitness,
  OPERATOR_NAMESPACE,
  operatorMetric,
  sampleAt,
  settledSampleLeader,
  uninstallWitness,
} from '../../hack/lib/operator.js';
import { waitRolloutComplete } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const leases = Object.values(SAMPLE_LEASES);
const log = makeLogger('test', 'warn');
const LEASE_MS = 15_000; // upstream timings

/** The Deployment has replaced `old`, the new pod holds every lease, and `recorder` has seen it do so. */
async function waitReplacedAndLeasesHeld(old: string, recorder: LeaseRecorder): Promise<void> {
  const after = await waitFor('a new pod', 120_000, async () => {
    const pods = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 120_000);
    return pods.some((p) => p.metadata?.name === old) ? undefined : pods;
  });
  await recorder.waitSeenHeldBy(after, 120_000);
}

/** When the node saw the last container of `pod` exit. */
async function lastExit(pod: string): Promise<number> {
  const exits = (await nodeEvents()).filter((e) => e.pod === pod && e.event === 'container-exited');
  expect(exits.length, `containers of ${pod} exited`).toBeGreaterThan(0);
  return Math.max(...exits.map((e) => Date.parse(e.t)));
}

/** A lease's release and acquisition from the last exit, for a failure's message (CI's log shows its tail). */
const timeline = (released: { t: number } | undefined, acquired: { t: number } | undefined, exitedAt: number): string =>
  `released ${released ? `${released.t - exitedAt} ms` : 'never'}, acquired ${acquired ? `${acquired.t - exitedAt} ms` : 'never'} after the last exit`;

const refusedReleases = (reason: string) => operatorMetric(http, `csi_handover_refused_releases_total{reason="${reason}"}`);

beforeAll(async () => {
  await installOperator(http);
  // A short gate timeout, so a pod held back for a holder that cannot be proven dead starts soon.
  await kubectl('-n', OPERATOR_NAMESPACE, 'set', 'env', 'deployment/csi-handover', 'GATE_TIMEOUT=20s', 'CSI_HANDOVER_MODE=standalone');
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
  await sampleAt(http, 'upstream-1replica');
  await installWitness(http);
});

afterAll(async () => {
  await setPartitioned('node-1', false).catch(() => undefined);
  await setPartitioned('node-2', false).catch(() => undefined);
  await kubectl('-n', OPERATOR_NAMESPACE, 'set', 'env', 'deployment/csi-handover', 'GATE_TIMEOUT-').catch(() => undefined);
  await uninstallWitness();
});

describe('no release without proof of death', () => {
  it('a force-deleted leader pod: the operator does not release; the lease expires after the processes are gone', async () => {
    const leader = await settledSampleLeader(http);
    const name = leader.metadata?.name ?? '';
    const refusedBefore = await refusedReleases('force-deleted');
    const recorder = new LeaseRecorder(http, NS, new Set(leases), log);
    await recorder.start();
    try {
      await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${name}`, { body: { gracePeriodSeconds: 0 } });
      await waitReplacedAndLeasesHeld(name, recorder);
    } finally {
      recorder.stop();
    }
    // Nobody wrote an empty holder: no release, by the operator or anyone.
    expect(recorder.observations.filter((o) => o.holder === '')).toEqual([]);
    const exitedAt = await lastExit(name);
    const lastRenewalSeen = Math.max(...recorder.observations.filter((o) => o.holder === name).map((o) => o.t));
    for (const lease of leases) {
      const acquired = recorder.observations.find((o) => o.lease === lease && o.holder !== name && o.holder !== '');
      expect(acquired, `${lease} acquired by the new pod`).toBeDefined();
      expect(acquired?.t ?? 0, `${lease} changed hands after the old processes exited`).toBeGreaterThan(exitedAt);
      // It changed hands by expiry: at least a lease duration after the old holder's last renewal we saw.
      expect((acquired?.t ?? 0) - lastRenewalSeen).toBeGreaterThanOrEqual(LEASE_MS - 1_000);
    }
    expect(await refusedReleases('force-deleted')).toBeGreaterThan(refusedBefore);
  });

  it('a leader on a partitioned node: no release while its processes run; released once they are gone', async () => {
    const leader = await settledSampleLeader(http);
    const name = leader.metadata?.name ?? '';
    const node = leader.spec?.nodeName ?? '';
    const recorder = new LeaseRecorder(http, NS, new Set(leases), log);
    await recorder.start();
    let reconnectedAt: number | undefined;
    try {
      await setPartitioned(node, true);
      await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${name}`);
      // Observe a window longer than the lease duration: the old leader still runs (its node never heard of
      // the deletion) and keeps renewing, so nothing may release or take its leases.
      const windowEnd = Date.now() + LEASE_MS + 5_000;
      await waitFor('the observation window', LEASE_MS + 10_000, () => Date.now() >= windowEnd, 500);
      for (const lease of leases) expect(recorder.holder(lease), `${lease} during the partition`).toBe(name);
      expect(recorder.observations.filter((o) => o.holder === '')).toEqual([]);
      reconnectedAt = Date.now();
      await setPartitioned(node, false);
      await waitReplacedAndLeasesHeld(name, recorder);
    } finally {
      recorder.stop();
      await setPartitioned(node, false);
    }
    const exitedAt = await lastExit(name);
    expect(exitedAt).toBeGreaterThan(reconnectedAt ?? Infinity);
    for (const lease of leases) {
      const released = recorder.observations.find((o) => o.lease === lease && o.holder === '');
      const acquired = recorder.observations.find((o) => o.lease === lease && o.holder !== name && o.holder !== '');
      // Released by the operator only after the processes exited.
      expect(released?.t ?? 0, `${lease} released after the old processes exited (${timeline(released, acquired, exitedAt)})`).toBeGreaterThan(exitedAt);
      // The new pod's gate timed out during the partition (fail open), so its sidecars were already polling:
      // they take the released lease on their next poll, within 2.2 × the 5s retry period.
      expect((acquired?.t ?? 0) - exitedAt, `${lease} handed over within a poll of the exit`).toBeLessThan(2.2 * 5_000 + 2_000);
    }
  });

  // The runtime down under a leader on each kind of node: containerd's containers live on under their shims,
  // CRI-O's under conmon. Each of these tests cordons the leader's node until it ends, so the replacement (the next
  // test's leader) runs on the other node: the two runtime tests stop one runtime each, whichever node comes first.
  const runtimesStopped: string[] = [];
  it.each([
    ['kubelet', 'kubelet'],
    ['runtime (one node)', 'runtime'],
    ['runtime (the other node)', 'runtime'],
  ] as const)("the leader deleted while its node's %s is down: nothing released until it is back and the processes are gone", async (_what, component) => {
    const leader = await settledSampleLeader(http);
    const name = leader.metadata?.name ?? '';
    const node = leader.spec?.nodeName ?? '';
    if (component === 'runtime') runtimesStopped.push((await nodeRuntimes(http)).get(node) ?? `unknown (${node})`);
    const recorder = new LeaseRecorder(http, NS, new Set(leases), log);
    await recorder.start();
    let restartedAt: number | undefined;
    try {
      await kubectl('cordon', node);
      // Down before the deletion, so the stop can only happen after the restart (a kubelet without its
      // runtime cannot kill; a stopped kubelet never hears of the deletion).
      await nodeComponent('stop', node, component);
      await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${name}`);
      // Longer than the lease duration: the old leader keeps running and renewing, so nothing may release.
      const windowEnd = Date.now() + LEASE_MS + 5_000;
      await waitFor('the observation window', LEASE_MS + 10_000, () => Date.now() >= windowEnd, 500);
      for (const lease of leases) expect(recorder.holder(lease), `${lease} while ${node}'s ${component} is down`).toBe(name);
      expect(recorder.observations.filter((o) => o.holder === '')).toEqual([]);
      restartedAt = Date.now();
      await nodeComponent('start', node, component);
      await waitReplacedAndLeasesHeld(name, recorder);
    } finally {
      recorder.stop();
      await nodeComponent('start', node, component).catch(() => undefined); // a no-op when it runs
      await kubectl('uncordon', node);
    }
    const exitedAt = await lastExit(name);
    expect(exitedAt).toBeGreaterThan(restartedAt ?? Infinity);
    for (const lease of leases) {
      const released = recorder.observations.find((o) => o.lease === lease && o.holder === '');
      const acquired = recorder.observations.find((o) => o.lease === lease && o.holder !== name && o.holder !== '');
      const when = timeline(released, acquired, exitedAt);
      if (released) expect(released.t, `${lease} released after the old processes exited (${when})`).toBeGreaterThan(exitedAt);
      expect(acquired?.t ?? 0, `${lease} changed hands after the old processes exited (${when})`).toBeGreaterThan(exitedAt);
    }
  });

  it('stopped the runtime under a leader once on each: containerd and CRI-O', () => {
    expect([...runtimesStopped].sort()).toEqual(['containerd', 'cri-o']);
  });
});
