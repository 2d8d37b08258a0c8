// The heart: with csi-handover, a logLevel change under OpenShift's lease timings (137s/107s/26s) hands
// every sidecar lease over within seconds of the old leader's SIGTERM — measured here independently, from a
// Lease watch and the nodes' own record of the kubelet's stop — and every handover is reported in the CR and
// as Events.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { HANDOVER_STATE } from '../../src/api/names.js';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { PatchType } from '../../src/kube/http.js';
import { Informer } from '../../src/kube/informer.js';
import { makeLogger } from '../../src/log.js';
import { type Handover, handoversFrom } from '../../hack/bench/handovers.js';
import { LeaseRecorder, sigtermTimes } from '../../hack/bench/recorder.js';
import {
  clusterHttp,
  kubectl,
  manageSnapshotController,
  SAMPLE_DEPLOYMENT,
  SAMPLE_DRIVER,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE as NS,
  SAMPLE_SNAPSHOT_CONTROLLER,
  waitFor,
} from '../../hack/lib/cluster.js';
import {
  deploySampleAtCrLevel,
  dropLeaseOfGonePod,
  installOperator,
  operatorLeader,
  reportStatus,
  setOperatorMode,
  setSampleCrLevel,
  settledSample,
  uninstallWitness,
} from '../../hack/lib/operator.js';
import { deploymentPath, rolloutRestart, waitLeasesHeldBy, waitRolloutComplete } from '../../hack/lib/rollout.js';
import { PodLogFollower } from '../../hack/lib/pod-logs.js';

const http = clusterHttp();
const leases = Object.values(SAMPLE_LEASES);
const crPath = `/apis/operator.openshift.io/v1/clustercsidrivers/${SAMPLE_DRIVER}`;
const log = makeLogger('test', 'warn');

interface CR {
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

const settled = (): Promise<V1Pod[]> => settledSample(http);

/**
 * Runs `trigger`, waits for the rollout and for every lease to be held by a new pod; returns the handovers,
 * timed from the old leader's SIGTERM (the kubelet's stop, from the node's record) and, as the operator times
 * them, from the first sight of its pod's deletion (a Pod watch here).
 */
async function measured(trigger: () => Promise<unknown>): Promise<{ handovers: Handover[]; fromDeletion: Handover[]; before: V1Pod[]; after: V1Pod[] }> {
  const before = await settled();
  const recorder = new LeaseRecorder(http, NS, new Set(leases), log);
  await recorder.start();
  const deletionSeen = new Map<string, number>();
  const pods = new Informer<V1Pod>(http, { path: `/api/v1/namespaces/${NS}/pods`, log });
  const seen = (p: V1Pod) => {
    const name = p.metadata?.name ?? '';
    if (p.metadata?.deletionTimestamp && !deletionSeen.has(name)) deletionSeen.set(name, Date.now());
  };
  pods.on('add', seen).on('update', seen);
  pods.start();
  await pods.waitForSync();
  let after: V1Pod[];
  try {
    await trigger();
    after = await waitFor('new pods', 300_000, async () => {
      const pods = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 300_000);
      const names = new Set(before.map((p) => p.metadata?.name));
      return pods.every((p) => !names.has(p.metadata?.name)) ? pods : undefined;
    });
    // Held by the new pods as the recorder saw it (a GET could see the last acquisition before its watch does).
    await recorder.waitSeenHeldBy(after, 300_000);
  } finally {
    recorder.stop();
    pods.stop();
  }
  const oldPods = new Set(before.map((p) => p.metadata?.name ?? ''));
  const handovers = handoversFrom(recorder.observations, await sigtermTimes(NS)).filter((h) => oldPods.has(h.oldHolder));
  const fromDeletion = handoversFrom(recorder.observations, deletionSeen).filter((h) => oldPods.has(h.oldHolder));
  for (const h of handovers) {
    const kubeletMs = (h.stopAt ?? NaN) - (deletionSeen.get(h.oldHolder) ?? NaN);
    console.log(
      `${h.lease}: ${h.oldHolder} → ${h.newHolder} ${h.gapMs === undefined ? '(no SIGTERM)' : `${(h.gapMs / 1000).toFixed(2)}s`} after SIGTERM (the kubelet stopped it ${kubeletMs} ms after the deletion) ${h.releasedAt ? 'released' : 'not released'}`,
    );
  }
  return { handovers, fromDeletion, before, after };
}

/** Every replica's log, read from the nodes as it is written (a deleted leader's too): what a slow handover is told by. */
const operatorLog = new PodLogFollower('csi-handover', 'csi-handover');

/** What the operator logged about the pods of a slow handover, from a little before the old leader's stop. */
function tellSlowHandovers(r: { handovers: Handover[] }, boundMs: number): void {
  const slow = r.handovers.filter((h) => (h.gapMs ?? Infinity) >= boundMs);
  if (!slow.length) return;
  const from = Math.min(...slow.map((h) => h.stopAt ?? Date.now())) - 5_000;
  const pods = new Set(slow.flatMap((h) => [h.oldHolder, h.newHolder]));
  console.log(`slow handovers: ${slow.map((h) => `${h.lease} ${h.oldHolder} → ${h.newHolder} ${h.gapMs} ms`).join('; ')}; the operator's log:`);
  for (const pod of operatorLog.pods()) {
    for (const e of operatorLog.entries(pod)) {
      if (
        e.t >= from &&
        (e.text.includes('"admission') ||
          e.text.includes('gate') ||
          /shutting down|shutdown|did not stop|leader/.test(e.text) ||
          [...pods].some((p) => e.text.includes(p)))
      )
        console.log(`  ${pod} ${e.text.slice(0, 600)}`);
    }
  }
}

/**
 * The bound on a handover here: under OpenShift's 26 s retry period, so a sidecar that tried before the release
 * (and so waited 26–57 s) fails it, with room for this 2-core machine's slow moments (one CI run saw a new pod
 * take 7.5 s to start, and a gap of 10.3 s). How fast handovers are is make bench's to measure, not a test's.
 */
const FAST_MS = 20_000;

/** Every lease ended with a handover from an old pod to a new one, each within `boundMs` of the old leader's SIGTERM. */
function expectFastHandovers(r: { handovers: Handover[]; after: V1Pod[] }, boundMs: number): void {
  tellSlowHandovers(r, boundMs);
  const newPods = new Set(r.after.map((p) => p.metadata?.name ?? ''));
  for (const lease of leases) {
    const last = r.handovers.filter((h) => h.lease === lease).at(-1);
    expect(last, `handover of ${lease}`).toBeDefined();
    expect(newPods.has(last?.newHolder ?? ''), `${lease} ends with a new pod`).toBe(true);
    for (const h of r.handovers.filter((x) => x.lease === lease)) {
      expect(h.gapMs, `gap of ${lease} from ${h.oldHolder}`).toBeDefined();
      expect(h.gapMs ?? Infinity, `gap of ${lease} from ${h.oldHolder}`).toBeLessThan(boundMs);
    }
  }
}

/** The CR reports the same handovers, with gaps that agree with ours timed from the same event (the deletion). */
async function expectReported(r: { handovers: Handover[]; fromDeletion: Handover[] }, releasedBy: string): Promise<void> {
  const report = await waitFor('the handover report', 30_000, async () => {
    const reported = (await reportStatus(http, SAMPLE_DRIVER))?.lastRollout?.leases ?? [];
    return leases.every((l) => reported.some((x) => x.lease === l && x.newHolder === r.handovers.filter((h) => h.lease === l).at(-1)?.newHolder))
      ? reported
      : undefined;
  });
  const cr = await http.get<CR>(crPath);
  for (const lease of leases) {
    const ours = r.fromDeletion.filter((h) => h.lease === lease).at(-1);
    const theirs = report.find((x) => x.lease === lease);
    expect(theirs?.releasedBy).toBe(releasedBy);
    expect(theirs?.gapSeconds, `the operator's gap of ${lease}`).toBeDefined();
    expect(ours?.gapMs, `our gap of ${lease}`).toBeDefined();
    // Two observers of the same events on one machine: within a second of each other.
    expect(Math.abs((theirs?.gapSeconds ?? NaN) * 1000 - (ours?.gapMs ?? NaN))).toBeLessThan(1_000);
  }
  const condition = cr.status?.conditions?.find((c) => c.type === 'CSIHandoverLeasesHandedOver');
  expect(condition?.status).toBe('True');
  expect(condition?.message).toMatch(/largest gap/);
  // The Events are gathered and written apart from the status (each batch waits for half a second without news):
  // the last one may land just after the status that reports it.
  const readEvents = () =>
    kubectl(
      'get',
      'events',
      '-n',
      'default',
      '--field-selector',
      `reason=LeaseHandedOver,involvedObject.name=${SAMPLE_DRIVER}`,
      '-o',
      'jsonpath={range .items[*]}{.message}{"\\n"}{end}',
    );
  const named = (text: string) => r.handovers.every((h) => text.includes(`${h.oldHolder} → ${h.newHolder}`));
  const events = await waitFor(
    'LeaseHandedOver Events naming every handover',
    10_000,
    async () => {
      const t = await readEvents();
      return named(t) ? t : undefined;
    },
    500,
  ).catch(() => readEvents());
  for (const h of r.handovers) expect(events, `event for ${h.lease} → ${h.newHolder}`).toContain(`${h.oldHolder} → ${h.newHolder}`);
}

const setLogLevel = (logLevel: string) => http.patch(crPath, { spec: { logLevel } }, PatchType.merge);

beforeAll(async () => {
  operatorLog.start(500);
  // These measure the gate's way (no node witness: witness.test.ts measures that one).
  await uninstallWitness();
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  // snapshot-controller is managed from the start: unmanaged, a rollout of it (this apply's OpenShift timings after
  // an earlier file's upstream ones, the 1-replica overlay's scale-down) leaves its old leader's lease to expire,
  // 137 s and more, under the tests that measure it. Labelled before the apply where an earlier file deployed it,
  // and after it, where the apply creates it (an apply keeps a label it does not set). An earlier file's rollout of
  // it, unmanaged then, may have left its lease to a pod that is gone: dropped before the apply's new pods look.
  await manageSnapshotController().catch(() => undefined);
  await dropLeaseOfGonePod(http, SAMPLE_SNAPSHOT_CONTROLLER.lease);
  // At the CR's level, then settled, then Normal: one template change at a time (see deploySample).
  await deploySampleAtCrLevel(http, 'openshift');
  await manageSnapshotController();
  await settled();
  await setSampleCrLevel(http, 'Normal');
  await settled();
});

afterAll(async () => {
  operatorLog.stop();
  await setOperatorMode(http, 'standalone').catch(() => undefined);
});

describe('standalone, OpenShift timings (137s/107s/26s)', () => {
  it('2 replicas: logLevel Normal → Debug hands every lease over within 20s of the old leader’s SIGTERM (less than a retry period), and reports it', async () => {
    const r = await measured(() => setLogLevel('Debug'));
    expectFastHandovers(r, FAST_MS);
    // Leader last: the standby went first, so each lease moved once.
    for (const lease of leases) expect(r.handovers.filter((h) => h.lease === lease)).toHaveLength(1);
    await expectReported(r, 'operator');
  });

  it('1 replica: logLevel Debug → Trace, the same', async () => {
    // At the CR's level (Debug), restarted in the same write: a scale-down alone leaves the leases of the pod it
    // removes to the other pod's standbys, which try again only every 26–57 s; new pods start and take them at once.
    await deploySampleAtCrLevel(http, 'openshift-1replica', true);
    await settled();
    const r = await measured(() => setLogLevel('Trace'));
    expectFastHandovers(r, FAST_MS);
    await expectReported(r, 'operator');
  });

  it('a kubectl rollout restart is coordinated too (its new pods are gated at admission)', async () => {
    const r = await measured(() => rolloutRestart(http, NS, SAMPLE_DEPLOYMENT));
    expectFastHandovers(r, FAST_MS);
  });
});

describe('other rollouts of managed Deployments', () => {
  it('a node drain evicting the leader pod is coordinated like a rollout', async () => {
    const r = await measured(async () => {
      // As `kubectl drain` does for each pod: the Eviction API (lowest deletion cost first).
      const pods = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 60_000);
      const byCost = [...pods].sort(
        (a, b) =>
          Number(a.metadata?.annotations?.['controller.kubernetes.io/pod-deletion-cost'] ?? 0) -
          Number(b.metadata?.annotations?.['controller.kubernetes.io/pod-deletion-cost'] ?? 0),
      );
      for (const p of byCost) {
        await http.request('POST', `/api/v1/namespaces/${NS}/pods/${p.metadata?.name}/eviction`, {
          body: {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name: p.metadata?.name, namespace: NS },
          },
        });
        await waitFor(`replacement of ${p.metadata?.name}`, 60_000, async () =>
          (await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 60_000)).every((x) => x.metadata?.name !== p.metadata?.name),
        );
      }
    });
    expectFastHandovers(r, FAST_MS);
  });

  it('snapshot-controller’s own Deployment, once labelled, is managed and handed over fast too', async () => {
    const lease = 'snapshot-controller-leader';
    // Labelled (beforeAll), it is managed: the operator brings it to the CR's level (Trace, --v=6). Settle on that.
    const atLevel = (v: number) => async () => {
      const pods = await waitRolloutComplete(http, NS, 'snapshot-controller', 120_000);
      return pods.every((p) => p.spec?.containers[0]?.args?.includes(`--v=${v}`)) ? pods : undefined;
    };
    const before = await waitFor('snapshot-controller at --v=6', 120_000, atLevel(6));
    await waitLeasesHeldBy(http, NS, [lease], before, 300_000);
    const recorder = new LeaseRecorder(http, NS, new Set([lease]), log);
    await recorder.start();
    let after: V1Pod[];
    try {
      await setLogLevel('Debug');
      after = await waitFor('snapshot-controller rolled to --v=4', 120_000, atLevel(4));
      await recorder.waitSeenHeldBy(after, 120_000);
    } finally {
      recorder.stop();
    }
    const oldPods = new Set(before.map((p) => p.metadata?.name));
    const handovers = handoversFrom(recorder.observations, await sigtermTimes(NS)).filter((h) => oldPods.has(h.oldHolder));
    expect(handovers.length).toBeGreaterThan(0);
    for (const h of handovers) {
      console.log(`${h.lease}: ${h.oldHolder} → ${h.newHolder} ${((h.gapMs ?? 0) / 1000).toFixed(2)}s`);
      expect(h.gapMs ?? Infinity).toBeLessThan(FAST_MS);
    }
  });
});

describe('companion mode, OpenShift timings', () => {
  it('gates new pods at admission as standalone does: 20 handovers over 4 rollout restarts, none waits a retry period, no template is written', async () => {
    await setOperatorMode(http, 'companion');
    // Back to standalone whatever happens here: the next tests change the level through the template.
    onTestFinished(() => setOperatorMode(http, 'standalone'));
    const generation = (await http.get<V1Deployment>(deploymentPath(NS, SAMPLE_DEPLOYMENT))).metadata?.generation ?? 0;
    const gaps: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await measured(() => rolloutRestart(http, NS, SAMPLE_DEPLOYMENT));
      expectFastHandovers(r, FAST_MS);
      gaps.push(...r.handovers.map((h) => h.gapMs ?? Infinity));
      // The pod that replaced the leader waited at the gate the webhook put on it, and says how it was let go.
      const waited = r.after.filter((p) => p.metadata?.annotations?.[HANDOVER_STATE]?.startsWith('started:'));
      expect(waited.length, 'new pods held back at admission').toBeGreaterThanOrEqual(1);
    }
    // Only the restarts wrote the template (their annotation), never the operator.
    expect((await http.get<V1Deployment>(deploymentPath(NS, SAMPLE_DEPLOYMENT))).metadata?.generation).toBe(generation + 4);
    const sorted = [...gaps].sort((a, b) => a - b);
    const q = (p: number) => ((sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN) / 1000).toFixed(2);
    console.log(
      `companion, ${gaps.length} handovers: gap p50 ${q(0.5)}s, p90 ${q(0.9)}s, max ${q(1)}s (s: ${gaps.map((g) => (g / 1000).toFixed(1)).join(', ')})`,
    );
    expect(gaps.length).toBeGreaterThanOrEqual(20);
  });
});

describe('operator leader killed mid-rollout', () => {
  it('the standby resumes and the rollout still completes with fast handovers', async () => {
    await deploySampleAtCrLevel(http, 'openshift');
    await settled();
    await setLogLevel('Trace');
    await settled();
    const r = await measured(async () => {
      await setLogLevel('Debug');
      const leader = await operatorLeader(http);
      // Deleted as a drain would: it stops its work, releases its own lease, and the standby takes over.
      await http.request('DELETE', `/api/v1/namespaces/csi-handover/pods/${leader.metadata?.name}`);
    });
    expectFastHandovers(r, FAST_MS);
  });
});
