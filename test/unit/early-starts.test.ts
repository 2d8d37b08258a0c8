// What the early-start bookkeeping learns from a pod let go before the release: with the witness, the webhook
// answers from its cache and leaves no mark on the pod, so a pod first seen mid-handover must count as let go
// early all the same — or a lost race would never send its workload back to the gate.
import type { V1Deployment, V1Lease, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { HANDOVER_STATE } from '../../src/api/names.js';
import { EarlyStarts } from '../../src/controller/handover/early-starts.js';
import type { HandoverRecord } from '../../src/handover/measure.js';
import type { ObservedPod } from '../../src/handover/observed-pod.js';
import { snapshotOf } from '../../src/handover/snapshot.js';
import { makeMetrics } from '../../src/metrics.js';

const NOW = Date.parse('2026-01-02T03:04:20Z');
const NS = 'csi';
const dep: V1Deployment = {
  metadata: { namespace: NS, name: 'ctrl', labels: { 'csi-handover.io/driver': 'd' } },
  spec: { selector: { matchLabels: { app: 'ctrl' } }, template: { spec: { containers: [{ name: 'csi-attacher' }] } } },
};
const pod = (name: string, o: { deleting?: boolean; annotations?: Record<string, string>; startedAt?: number; waiting?: boolean } = {}): V1Pod => ({
  metadata: {
    name,
    namespace: NS,
    uid: `uid-${name}`,
    labels: { app: 'ctrl' },
    annotations: o.annotations,
    ...(o.deleting ? { deletionTimestamp: new Date(NOW - 1_000), deletionGracePeriodSeconds: 30 } : {}),
  },
  spec: { nodeName: 'n1', containers: [{ name: 'csi-attacher' }] },
  status: {
    phase: 'Running',
    containerStatuses: [
      {
        name: 'csi-attacher',
        image: 'i',
        imageID: '',
        ready: !o.waiting,
        restartCount: 0,
        state: o.waiting ? { waiting: { reason: 'ContainerCreating' } } : { running: { startedAt: new Date(o.startedAt ?? NOW - 5_000) } },
      },
    ],
  },
});
const lease: V1Lease = {
  metadata: { namespace: NS, name: 'external-attacher-leader' },
  spec: { holderIdentity: 'ctrl-old', leaseDurationSeconds: 137, renewTime: new Date(NOW - 2_000) },
};
const old: ObservedPod = { pod: pod('ctrl-old', { deleting: true }), gone: false };
const s = snapshotOf(
  { deployments: [dep], pods: [old], leases: [lease], nodes: [{ metadata: { name: 'n1' }, status: { conditions: [{ type: 'Ready', status: 'True' }] } }] },
  NOW,
);

function early() {
  const metrics = makeMetrics();
  const e = new EarlyStarts({
    enabled: false,
    witnessedNodes: () => new Set(['n1']),
    log: pino({ level: 'silent' }),
    metrics,
    stopSeenAt: () => undefined,
    now: () => NOW,
  });
  return { e, lost: async () => (await metrics.overlapLost.get()).values.reduce((n, v) => n + v.value, 0) };
}
/** The new pod took the lease `afterMs` after the release (and after it was let go, at NOW). */
const handover = (newPod: string, afterMs: number): HandoverRecord => ({
  namespace: NS,
  lease: 'external-attacher-leader',
  oldHolder: 'ctrl-old',
  newHolder: newPod,
  oldPod: 'uid-ctrl-old',
  newPod: `uid-${newPod}`,
  stopAt: NOW - 1_000,
  releasedAt: NOW,
  releasedBy: 'operator',
  acquiredAt: NOW + afterMs,
});

describe('EarlyStarts: a pod first seen ungated', () => {
  it.each<[string, { annotations?: Record<string, string>; startedAt?: number; waiting?: boolean }, boolean, number, boolean]>([
    ['unmarked, while its workload’s handover was pending (the webhook answered from its cache), lost the race', {}, true, 30_000, true],
    ['unmarked, while its workload’s handover was pending, took the lease at once', {}, true, 2_000, false],
    ['unmarked, nothing pending (a scale-up): not let go early, learns nothing of a race', {}, false, 30_000, false],
    ['marked by the webhook (overlap), lost the race', { annotations: { [HANDOVER_STATE]: 'started: overlap: x' } }, false, 30_000, true],
    [
      'let go early, its last container started 8 s after the release (a busy node), the lease taken 1 s later: a late start, not a lost race',
      { startedAt: NOW + 8_000 },
      true,
      9_500,
      false,
    ],
    ['let go early, a container not reported started yet when the lease was taken: no lost race to tell', { waiting: true }, true, 30_000, false],
    ['let go early, its containers up 4 s before the release, the lease taken 30 s later: lost', { startedAt: NOW - 4_000 }, true, 30_000, true],
  ])('%s', async (_n, o, pending, afterMs, wantLost) => {
    const { e, lost } = early();
    const next = pod('ctrl-new', o);
    e.podSeen(next, undefined, () => pending);
    e.learn(handover('ctrl-new', afterMs), old, { pod: next, gone: false }, s);
    expect(await lost()).toBe(wantLost ? 1 : 0);
    // After a lost race the workload's new pods wait for the release again, witness or not.
    expect(e.earlyLift(s)?.(old)).toBe(wantLost ? undefined : NOW);
  });
});
