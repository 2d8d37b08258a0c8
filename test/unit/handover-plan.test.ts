// The two planners, one row per situation that matters: over one snapshot, what the engine does for a lease
// (release, refuse and say why, or nothing) and for a workload (deletion costs, gate holds and lifts, when to
// look again).
import type { V1Deployment, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { HANDOVER_GATE, HANDOVER_STATE, RELEASED_BY_OPERATOR } from '../../src/api/names.js';
import { DELETION_COST } from '../../src/handover/deletion-cost.js';
import type { ObservedPod } from '../../src/handover/observed-pod.js';
import { handoverPendingFor } from '../../src/handover/pending.js';
import {
  type AdmissionPlan,
  admissionSettled,
  alreadyDone,
  handoverOwner,
  type LeasePlan,
  observeLease,
  planAdmission,
  planLease,
  planOrphanGate,
  planWorkload,
  type WorkloadPlan,
} from '../../src/handover/plan.js';

import { snapshotOf } from '../../src/handover/snapshot.js';

const NOW = Date.parse('2026-01-02T03:04:20Z');
const GATE_TIMEOUT = 60_000;
const NS = 'csi';

const deployment = (opts: { ns?: string; name?: string; app?: string; electIn?: string } = {}): V1Deployment => ({
  metadata: { namespace: opts.ns ?? NS, name: opts.name ?? 'ctrl', labels: { 'csi-handover.io/driver': 'd' } },
  spec: {
    selector: { matchLabels: { app: opts.app ?? 'ctrl' } },
    template: { spec: { containers: [{ name: 'csi-attacher', args: opts.electIn ? [`--leader-election-namespace=${opts.electIn}`] : [] }] } },
  },
});

type State = 'running' | 'terminated';
interface PodOpts {
  ns?: string;
  app?: string;
  state?: State;
  deleting?: boolean;
  gone?: boolean;
  node?: string;
  hostNetwork?: boolean;
  gated?: boolean;
  waited?: string;
  cost?: string;
  ageMs?: number;
}
function observed(name: string, o: PodOpts = {}): ObservedPod {
  const annotations: Record<string, string> = {};
  if (o.waited !== undefined) annotations[HANDOVER_STATE] = o.waited;
  if (o.cost !== undefined) annotations[DELETION_COST] = o.cost;
  const state = o.state ?? 'running';
  const pod: V1Pod = {
    metadata: {
      name,
      namespace: o.ns ?? NS,
      uid: `uid-${name}`,
      labels: { app: o.app ?? 'ctrl' },
      annotations,
      creationTimestamp: new Date(NOW - (o.ageMs ?? 120_000)),
      ...(o.deleting || o.gone ? { deletionTimestamp: new Date(NOW - 5_000), deletionGracePeriodSeconds: 30 } : {}),
    },
    spec: {
      nodeName: o.gated ? undefined : (o.node ?? 'n1'),
      hostNetwork: o.hostNetwork,
      containers: [{ name: 'csi-attacher' }],
      schedulingGates: o.gated ? [{ name: HANDOVER_GATE }] : undefined,
    },
    status: o.gated
      ? { phase: 'Pending' }
      : {
          phase: 'Running',
          containerStatuses: [
            {
              name: 'csi-attacher',
              image: 'i',
              imageID: '',
              ready: state === 'running',
              restartCount: 0,
              state: state === 'running' ? { running: {} } : { terminated: { exitCode: 0, finishedAt: new Date(NOW - 3_000) } },
            },
          ],
        },
  };
  return o.gone ? { pod, gone: true, goneAt: NOW - 1_000, gracefulDeletionSeconds: 30 } : { pod, gone: false };
}

const lease = (holder: string, o: { ns?: string; name?: string; renewedAgoMs?: number } = {}): V1Lease => ({
  metadata: { namespace: o.ns ?? NS, name: o.name ?? 'external-attacher-leader', resourceVersion: '1' },
  spec: { holderIdentity: holder, leaseDurationSeconds: 137, renewTime: new Date(NOW - (o.renewedAgoMs ?? 6_000)), acquireTime: new Date(NOW - 600_000) },
});
const ready = (name: string, status = 'True'): V1Node => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status }] } });

const leaseSummary = (p: LeasePlan): string =>
  p.action === 'release'
    ? `release ${p.pod} (${p.evidence}), recheck ${p.recheck ? `${p.recheck.namespace}/${p.recheck.name}` : '-'}`
    : p.action === 'refuse'
      ? `refuse ${p.reason}`
      : 'none';

describe('planLease', () => {
  const dep = deployment();
  it.each<[string, { deployments?: V1Deployment[]; pods: ObservedPod[]; lease: V1Lease; nodes?: V1Node[] }, string]>([
    [
      'holder deleted gracefully, every container terminated: release, its workload looks again',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated' }), observed('ctrl-new')], lease: lease('ctrl-old') },
      'release csi/ctrl-old (deleted-after-containers-terminated), recheck csi/ctrl',
    ],
    [
      'holder terminating, containers terminated, object still there: release',
      { pods: [observed('ctrl-old', { deleting: true, state: 'terminated' })], lease: lease('ctrl-old') },
      'release csi/ctrl-old (containers-terminated), recheck csi/ctrl',
    ],
    [
      'client-go style <pod>_<suffix> holder: the same pod, released',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated' })], lease: lease('ctrl-old_4f1c') },
      'release csi/ctrl-old (deleted-after-containers-terminated), recheck csi/ctrl',
    ],
    ['holder alive and not being stopped: the normal case, nothing to say', { pods: [observed('ctrl-old')], lease: lease('ctrl-old') }, 'none'],
    [
      'holder terminating but still running: refused, its containers run',
      { pods: [observed('ctrl-old', { deleting: true })], lease: lease('ctrl-old') },
      'refuse containers-running',
    ],
    [
      'holder terminating on a node that is not Ready: refused',
      { pods: [observed('ctrl-old', { deleting: true, state: 'terminated' })], lease: lease('ctrl-old'), nodes: [ready('n1', 'Unknown')] },
      'refuse node-not-ready',
    ],
    [
      'holder force-deleted: refused',
      {
        pods: [
          {
            ...observed('ctrl-old', { gone: true, state: 'terminated' }),
            gracefulDeletionSeconds: undefined,
            pod: {
              ...observed('ctrl-old').pod,
              metadata: { ...observed('ctrl-old').pod.metadata, deletionTimestamp: new Date(NOW), deletionGracePeriodSeconds: 0 },
            },
          },
        ],
        lease: lease('ctrl-old'),
      },
      'refuse force-deleted',
    ],
    ['identity nobody has: refused (unknown)', { pods: [observed('ctrl-new')], lease: lease('stranger') }, 'refuse unknown-identity'],
    [
      'renewed after the holder finished: someone else renews under that name, refused',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated' })], lease: lease('ctrl-old', { renewedAgoMs: 500 }) },
      'refuse holder-alive',
    ],
    [
      'hostNetwork holder, the only pod on its node, dead: release',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated', hostNetwork: true })], lease: lease('n1') },
      'release csi/ctrl-old (deleted-after-containers-terminated), recheck csi/ctrl',
    ],
    [
      'hostNetwork holder with the new pod already on the same node: two may hold it, refused',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated', hostNetwork: true }), observed('ctrl-new', { hostNetwork: true })], lease: lease('n1') },
      'refuse ambiguous-host-network',
    ],
    [
      'lease in another namespace, where the workload elects (--leader-election-namespace): release',
      {
        deployments: [deployment({ electIn: 'leases' })],
        pods: [observed('ctrl-old', { gone: true, state: 'terminated' })],
        lease: lease('ctrl-old', { ns: 'leases' }),
      },
      'release csi/ctrl-old (deleted-after-containers-terminated), recheck csi/ctrl',
    ],
    [
      'lease in a namespace no managed workload elects in: nothing',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated' })], lease: lease('ctrl-old', { ns: 'elsewhere' }) },
      'none',
    ],
    [
      'held by a finished pod of an unmanaged app: another controller’s lease, neither released nor refused',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated', app: 'other' }), observed('ctrl-new')], lease: lease('ctrl-old') },
      'none',
    ],
    [
      'held by a running pod of an unmanaged app (its leader changed): nothing to say',
      {
        pods: [observed('snapshot-controller-7c5f-8lq9t', { app: 'snapshot-controller' }), observed('ctrl-new')],
        lease: lease('snapshot-controller-7c5f-8lq9t'),
      },
      'none',
    ],
    [
      'client-go style <pod>_<suffix> of an unmanaged pod: another controller’s lease',
      { pods: [observed('driver-operator-5d9f-x2x7q', { app: 'operator' }), observed('ctrl-new')], lease: lease('driver-operator-5d9f-x2x7q_1f0c9a') },
      'none',
    ],
    [
      'an unmanaged pod elsewhere does not vouch for an identity here: refused (unknown)',
      { pods: [observed('other-7c5f-abcde', { app: 'other', ns: 'elsewhere' }), observed('ctrl-new')], lease: lease('other-7c5f-abcde') },
      'refuse unknown-identity',
    ],
    [
      'malformed lease: refused as malformed',
      {
        pods: [observed('ctrl-old', { gone: true, state: 'terminated' })],
        lease: { ...lease('ctrl-old'), spec: { holderIdentity: 'ctrl-old', leaseDurationSeconds: -1 } },
      },
      'refuse malformed-lease',
    ],
  ])('%s', (_name, c, want) => {
    const s = snapshotOf({ deployments: c.deployments ?? [dep], pods: c.pods, leases: [c.lease], nodes: c.nodes ?? [ready('n1'), ready('n2')] }, NOW);
    expect(leaseSummary(planLease(s, c.lease, NOW))).toBe(want);
  });

  it('two drivers’ leases of the same name in two namespaces resolve against their own pods', () => {
    const a = deployment({ ns: 'a' });
    const b = deployment({ ns: 'b' });
    const pods = [observed('ctrl-x', { ns: 'a', gone: true, state: 'terminated' }), observed('ctrl-x', { ns: 'b' })];
    const s = snapshotOf({ deployments: [a, b], pods, leases: [], nodes: [ready('n1')] }, NOW);
    expect(leaseSummary(planLease(s, lease('ctrl-x', { ns: 'a' }), NOW))).toBe('release a/ctrl-x (deleted-after-containers-terminated), recheck a/ctrl');
    expect(leaseSummary(planLease(s, lease('ctrl-x', { ns: 'b' }), NOW))).toBe('none');
  });
});

const workloadSummary = (p: WorkloadPlan): string[] =>
  p.actions.map((a) => {
    const name = a.pod.metadata?.name ?? '';
    if (a.kind === 'set-deletion-cost')
      return `cost ${name} ${JSON.stringify((a.patch as { metadata: { annotations: Record<string, unknown> } }).metadata.annotations[DELETION_COST])}`;
    if (a.kind === 'hold') return `hold ${name}: ${a.message}`;
    return `lift ${name} ${a.reason}${a.warning ? ` (${a.warning.reason})` : ''}`;
  });

describe('planWorkload', () => {
  const dep = deployment();
  const nodes = [ready('n1'), ready('n2')];
  it.each<[string, { pods: ObservedPod[]; leases: V1Lease[]; deployments?: V1Deployment[] }, string[], string[], number | undefined]>([
    [
      'leader last: the leader of two leases costs 100, a standby nothing',
      { pods: [observed('ctrl-a'), observed('ctrl-b')], leases: [lease('ctrl-a'), lease('ctrl-a', { name: 'provisioner' })] },
      [],
      ['cost ctrl-a "100"'],
      undefined,
    ],
    [
      'a pod that lost its leases goes back to the default cost',
      { pods: [observed('ctrl-a', { cost: '100' }), observed('ctrl-b')], leases: [lease('ctrl-b')] },
      [],
      ['cost ctrl-a null', 'cost ctrl-b "100"'],
      undefined,
    ],
    [
      'terminating pods carry no cost',
      { pods: [observed('ctrl-a', { deleting: true })], leases: [lease('ctrl-a')] },
      ['csi/external-attacher-leader ← ctrl-a'],
      [],
      undefined,
    ],
    [
      'a gated pod while the old leader still runs: held, with what it waits for; look again at the timeout',
      { pods: [observed('ctrl-old', { deleting: true }), observed('ctrl-new', { gated: true, ageMs: 1_000 })], leases: [lease('ctrl-old')] },
      ['csi/external-attacher-leader ← ctrl-old'],
      ['hold ctrl-new: waiting for csi/external-attacher-leader ← ctrl-old'],
      59_000,
    ],
    [
      'held already with the same message: no write, still looks again',
      {
        pods: [
          observed('ctrl-old', { deleting: true }),
          observed('ctrl-new', { gated: true, ageMs: 1_000, waited: 'waiting for csi/external-attacher-leader ← ctrl-old' }),
        ],
        leases: [lease('ctrl-old')],
      },
      ['csi/external-attacher-leader ← ctrl-old'],
      [],
      59_000,
    ],
    [
      'the old leader proven dead: the pod that waited is let go',
      {
        pods: [observed('ctrl-old', { gone: true, state: 'terminated' }), observed('ctrl-new', { gated: true, waited: 'waiting for …' })],
        leases: [lease('ctrl-old')],
      },
      [],
      ['lift ctrl-new handover-complete'],
      undefined,
    ],
    [
      'nothing handing over (a standby replaced): let go at once',
      { pods: [observed('ctrl-a'), observed('ctrl-new', { gated: true })], leases: [lease('ctrl-a')] },
      [],
      ['cost ctrl-a "100"', 'lift ctrl-new no-handover-pending'],
      undefined,
    ],
    [
      'the old leader alive past the gate timeout: let go anyway, with a Warning (fail open)',
      { pods: [observed('ctrl-old', { deleting: true }), observed('ctrl-new', { gated: true, ageMs: 61_000, waited: 'w' })], leases: [lease('ctrl-old')] },
      ['csi/external-attacher-leader ← ctrl-old'],
      ['lift ctrl-new timeout (HandoverGateTimeout)'],
      undefined,
    ],
    [
      'leases in another namespace (--leader-election-namespace) count: held while that old leader runs',
      {
        deployments: [deployment({ electIn: 'leases' })],
        pods: [observed('ctrl-old', { deleting: true }), observed('ctrl-new', { gated: true, ageMs: 1_000 })],
        leases: [lease('ctrl-old', { ns: 'leases' })],
      },
      ['leases/external-attacher-leader ← ctrl-old'],
      ['hold ctrl-new: waiting for leases/external-attacher-leader ← ctrl-old'],
      59_000,
    ],
    [
      'hostNetwork leader terminating on its node: pending, the new pod is held',
      {
        pods: [observed('ctrl-old', { deleting: true, hostNetwork: true }), observed('ctrl-new', { gated: true, ageMs: 1_000, hostNetwork: true })],
        leases: [lease('n1')],
      },
      ['csi/external-attacher-leader ← ctrl-old'],
      ['hold ctrl-new: waiting for csi/external-attacher-leader ← ctrl-old'],
      59_000,
    ],
    [
      'the old leader not proven dead (force-deleted) but its lease runs out before the timeout: looked at again then',
      {
        pods: [observed('ctrl-old', { deleting: true }), observed('ctrl-new', { gated: true, ageMs: 1_000 })],
        leases: [lease('ctrl-old', { renewedAgoMs: 130_000 })],
      },
      ['csi/external-attacher-leader ← ctrl-old'],
      ['hold ctrl-new: waiting for csi/external-attacher-leader ← ctrl-old'],
      7_010,
    ],
    [
      '... and once it has run out, no handover is pending: the pod that waited is let go (before the gate timeout)',
      {
        pods: [observed('ctrl-old', { deleting: true }), observed('ctrl-new', { gated: true, ageMs: 8_000, waited: 'waiting for …' })],
        leases: [lease('ctrl-old', { renewedAgoMs: 137_001 })],
      },
      [],
      ['lift ctrl-new lease-expired'],
      undefined,
    ],
    [
      'a lease held by another workload’s pod in the namespace is not ours to wait for',
      {
        deployments: [dep, deployment({ name: 'snapshot-controller', app: 'snap' })],
        pods: [observed('snap-old', { app: 'snap', deleting: true }), observed('ctrl-new', { gated: true })],
        leases: [lease('snap-old')],
      },
      [],
      ['lift ctrl-new no-handover-pending'],
      undefined,
    ],
  ])('%s', (_name, c, pending, actions, requeue) => {
    const s = snapshotOf({ deployments: c.deployments ?? [dep], pods: c.pods, leases: c.leases, nodes }, NOW);
    const target = (c.deployments ?? [dep])[0] ?? dep;
    const plan = planWorkload(s, target, NOW, GATE_TIMEOUT);
    expect(plan.pending).toEqual(pending);
    expect(workloadSummary(plan)).toEqual(actions);
    expect(plan.requeueAfterMs).toBe(requeue);
  });

  it('a pod that waited keeps a record of how it was let go', () => {
    const pods = [observed('ctrl-new', { gated: true, waited: 'waiting for x' })];
    const plan = planWorkload(snapshotOf({ deployments: [dep], pods, leases: [], nodes }, NOW), dep, NOW, GATE_TIMEOUT);
    const lift = plan.actions[0];
    expect(lift?.kind === 'lift' && lift.patch.at(-1)).toEqual({
      op: 'replace',
      path: '/metadata/annotations/csi-handover.io~1handover-state',
      value: 'started: the old leader released its leases',
    });
  });
});

describe('alreadyDone (a pod action decided on an older version of its pod, due now)', () => {
  const dep = deployment();
  const nodes = [ready('n1')];
  const actionOn = (pods: ObservedPod[], leases: V1Lease[], kind: string) => {
    const a = planWorkload(snapshotOf({ deployments: [dep], pods, leases, nodes }, NOW), dep, NOW, GATE_TIMEOUT).actions.find((x) => x.kind === kind);
    if (!a) throw new Error(`no ${kind} planned`);
    return a;
  };
  const lift = actionOn([observed('ctrl-new', { gated: true, waited: 'waiting for x' })], [], 'lift');
  const cost = actionOn([observed('ctrl-a')], [lease('ctrl-a')], 'set-deletion-cost');
  const uncost = actionOn([observed('ctrl-a', { cost: '100' })], [], 'set-deletion-cost');
  const hold = actionOn([observed('ctrl-old', { deleting: true }), observed('ctrl-new', { gated: true, ageMs: 1_000 })], [lease('ctrl-old')], 'hold');
  const holding = 'waiting for csi/external-attacher-leader ← ctrl-old';
  it.each<[string, ReturnType<typeof actionOn>, V1Pod | undefined, boolean]>([
    ['a lift on the same pod, still gated: to do', lift, observed('ctrl-new', { gated: true, waited: 'waiting for x' }).pod, false],
    ['a lift on a pod whose gate is gone (our earlier lift’s echo): done, a write would be refused (422)', lift, observed('ctrl-new').pod, true],
    ['a cost on a pod without it: to do', cost, observed('ctrl-a').pod, false],
    ['a cost on a pod that carries it now: done', cost, observed('ctrl-a', { cost: '100' }).pod, true],
    ['a cost removal on a pod that still has it: to do', uncost, observed('ctrl-a', { cost: '100' }).pod, false],
    ['a cost removal on a pod without it: done', uncost, observed('ctrl-a').pod, true],
    ['a hold whose message is not on the pod: to do', hold, observed('ctrl-new', { gated: true, waited: 'waiting for something else' }).pod, false],
    ['a hold whose message the pod carries: done', hold, observed('ctrl-new', { gated: true, waited: holding }).pod, true],
    ['the pod gone from the cache: nothing to do', cost, undefined, true],
    [
      'another pod of the same name now: nothing to do for the old one',
      cost,
      { ...observed('ctrl-a').pod, metadata: { ...observed('ctrl-a').pod.metadata, uid: 'other' } },
      true,
    ],
  ])('%s', (_name, action, current, done) => {
    expect(alreadyDone(action, current)).toBe(done);
  });
});

describe('planOrphanGate', () => {
  it('lifts our gate on a pod no managed workload selects, and leaves managed or deleting pods alone', () => {
    const s = snapshotOf({ deployments: [deployment()], pods: [], leases: [], nodes: [] }, NOW);
    expect(planOrphanGate(s, observed('stray', { gated: true, app: 'unmanaged' }).pod)).toMatchObject({ kind: 'lift', reason: 'unmanaged' });
    expect(planOrphanGate(s, observed('ctrl-new', { gated: true }).pod)).toBeUndefined();
    expect(planOrphanGate(s, observed('stray', { gated: true, app: 'unmanaged', deleting: true }).pod)).toBeUndefined();
    expect(planOrphanGate(s, observed('stray', { app: 'unmanaged' }).pod)).toBeUndefined();
  });
});

describe('planAdmission (the webhook: gate a new pod only while a handover is pending)', () => {
  const nodes = [ready('n1'), ready('n2')];
  const newPod = (app = 'ctrl', ns = NS): V1Pod => ({
    metadata: { generateName: 'ctrl-7d9-', namespace: ns, labels: { app } },
    spec: { containers: [{ name: 'csi-attacher' }] },
  });
  const two = [lease('ctrl-old'), lease('ctrl-old', { name: 'external-provisioner-leader' })];
  it.each<[string, { pods: ObservedPod[]; leases: V1Lease[]; pod?: V1Pod; deployments?: V1Deployment[] }, string]>([
    [
      'the leader is being deleted, still running: gated, waiting for both its leases',
      { pods: [observed('ctrl-old', { deleting: true })], leases: two },
      'gate: waiting for csi/external-attacher-leader ← ctrl-old, csi/external-provisioner-leader ← ctrl-old',
    ],
    ['the leader runs and is not stopping (a surge, a scale-up): admitted unchanged', { pods: [observed('ctrl-old')], leases: two }, 'no-handover-pending'],
    [
      'a standby is being deleted, the leader runs: admitted unchanged',
      { pods: [observed('ctrl-old'), observed('ctrl-sb', { deleting: true })], leases: two },
      'no-handover-pending',
    ],
    [
      'the leader is proven dead already (its release is imminent): admitted unchanged',
      { pods: [observed('ctrl-old', { gone: true, state: 'terminated' })], leases: two },
      'no-handover-pending',
    ],
    ['the leases are free: admitted unchanged', { pods: [], leases: [lease('')] }, 'no-handover-pending'],
    [
      'the leader is being deleted but its leases ran out (nobody renews them): admitted unchanged',
      { pods: [observed('ctrl-old', { deleting: true })], leases: two.map((l) => ({ ...l, spec: { ...l.spec, renewTime: new Date(NOW - 140_000) } })) },
      'no-handover-pending',
    ],
    [
      'a pod of no managed workload: admitted unchanged, whatever is pending',
      { pods: [observed('ctrl-old', { deleting: true })], leases: two, pod: newPod('other') },
      'not-managed',
    ],
    [
      'the same labels in another namespace: not this workload',
      { pods: [observed('ctrl-old', { deleting: true })], leases: two, pod: newPod('ctrl', 'elsewhere') },
      'not-managed',
    ],
    [
      'a pod created bound to a node cannot take a gate',
      { pods: [observed('ctrl-old', { deleting: true })], leases: two, pod: { ...newPod(), spec: { nodeName: 'n1', containers: [] } } },
      'not-gateable',
    ],
    [
      'a pod that carries our gate already (an old template): not gated twice',
      {
        pods: [observed('ctrl-old', { deleting: true })],
        leases: two,
        pod: { ...newPod(), spec: { schedulingGates: [{ name: HANDOVER_GATE }], containers: [] } },
      },
      'not-gateable',
    ],
    [
      'the leader elects in another namespace and is being deleted: gated',
      { pods: [observed('ctrl-old', { deleting: true })], leases: [lease('ctrl-old', { ns: 'leases' })], deployments: [deployment({ electIn: 'leases' })] },
      'gate: waiting for leases/external-attacher-leader ← ctrl-old',
    ],
  ])('%s', (_n, c, want) => {
    const s = snapshotOf({ deployments: c.deployments ?? [deployment()], pods: c.pods, leases: c.leases, nodes }, NOW);
    const plan = planAdmission(s, c.pod ?? newPod());
    expect(plan.gate ? `gate: ${plan.message}` : plan.reason).toBe(want);
  });

  it('the patch adds the gate and says what the pod waits for, beside gates and annotations it has', () => {
    const s = snapshotOf({ deployments: [deployment()], pods: [observed('ctrl-old', { deleting: true })], leases: [lease('ctrl-old')], nodes }, NOW);
    const bare = planAdmission(s, newPod());
    expect(bare.gate && bare.patch).toEqual([
      { op: 'add', path: '/spec/schedulingGates', value: [{ name: HANDOVER_GATE }] },
      { op: 'add', path: '/metadata/annotations', value: { [HANDOVER_STATE]: 'waiting for csi/external-attacher-leader ← ctrl-old' } },
    ]);
    const dressed: V1Pod = { metadata: { ...newPod().metadata, annotations: { a: 'b' } }, spec: { schedulingGates: [{ name: 'other' }], containers: [] } };
    const plan = planAdmission(s, dressed);
    expect(plan.gate && plan.patch).toEqual([
      { op: 'add', path: '/spec/schedulingGates/-', value: { name: HANDOVER_GATE } },
      { op: 'add', path: '/metadata/annotations/csi-handover.io~1handover-state', value: 'waiting for csi/external-attacher-leader ← ctrl-old' },
    ]);
  });
});

describe('starting new pods before the release (overlap)', () => {
  const nodes = [ready('n1'), ready('n2')];
  const newPod = (): V1Pod => ({ metadata: { generateName: 'ctrl-7d9-', namespace: NS, labels: { app: 'ctrl' } }, spec: { containers: [] } });
  const s = () =>
    snapshotOf(
      {
        deployments: [deployment()],
        pods: [observed('ctrl-old', { deleting: true }), observed('ctrl-new', { gated: true, waited: 'waiting for x', ageMs: 200 })],
        leases: [lease('ctrl-old')],
        nodes,
      },
      NOW,
    );
  it.each<[string, number | undefined, string]>([
    ['nothing learned: gated, as before', undefined, 'gate'],
    ['the old leader is predicted released in time: admitted ungated, saying why', NOW - 1, 'overlap'],
    ['predicted in time only later: gated (the gate comes off at that moment)', NOW + 400, 'gate'],
  ])('admission — %s', (_n, at, want) => {
    const plan = planAdmission(s(), newPod(), () => at);
    expect(plan.gate ? 'gate' : plan.reason).toBe(want);
    if (!plan.gate && plan.reason === 'overlap') {
      expect(plan.patch).toEqual([
        {
          op: 'add',
          path: '/metadata/annotations',
          value: { [HANDOVER_STATE]: expect.stringMatching(/^started: overlap: csi\/external-attacher-leader ← ctrl-old predicted released/) },
        },
      ]);
    }
  });

  it('a gated pod is let go at the predicted moment, and looked at again exactly then', () => {
    const later = planWorkload(s(), deployment(), NOW, GATE_TIMEOUT, () => NOW + 400);
    expect(later.actions.filter((a) => a.kind === 'lift')).toEqual([]);
    expect(later.requeueAfterMs).toBe(400);
    const now = planWorkload(s(), deployment(), NOW, GATE_TIMEOUT, () => NOW);
    const lift = now.actions.find((a) => a.kind === 'lift');
    expect(lift).toMatchObject({ reason: 'overlap' });
    expect(JSON.stringify(lift?.kind === 'lift' && lift.patch)).toContain('started: overlap: ');
  });

  describe('admissionSettled: the webhook may answer from its cache (no re-read of the holders)', () => {
    const world = (holders: PodOpts[]) =>
      snapshotOf(
        {
          deployments: [deployment()],
          pods: holders.map((o, i) => observed(`ctrl-${i}`, o)),
          leases: holders.map((_o, i) => lease(`ctrl-${i}`, { name: `lease-${i}` })),
          nodes,
        },
        NOW,
      );
    const onN1 = (h: ObservedPod) => (h.pod.spec?.nodeName === 'n1' ? NOW : undefined);
    it.each<[string, PodOpts[], ((h: ObservedPod) => number | undefined) | undefined, V1Pod | undefined, boolean]>([
      ['every holder would let a new pod start now (a witness on its node): settled', [{}, { node: 'n1' }], onN1, undefined, true],
      ['one holder on a node without a witness: re-read', [{}, { node: 'n2' }], onN1, undefined, false],
      ['no early starts at all: re-read', [{}], undefined, undefined, false],
      ['an early start only later: re-read', [{}], () => NOW + 400, undefined, false],
      ['a pod of no managed workload: settled (nothing to read)', [{}], undefined, { metadata: { labels: { app: 'other' }, namespace: NS } }, true],
    ])('%s', (_n, holders, early, pod, want) => {
      expect(admissionSettled(world(holders), pod ?? newPod(), early)).toBe(want);
    });

    it('settled means ungated either way: whether or not the cache has seen the holder being stopped yet', () => {
      const running = planAdmission(world([{}]), newPod(), onN1);
      const stopping = planAdmission(world([{ deleting: true }]), newPod(), onN1);
      const said = (p: AdmissionPlan) => (p.gate ? 'gate' : p.reason);
      expect([said(running), said(stopping)]).toEqual(['no-handover-pending', 'overlap']);
    });
  });

  it('handoverPendingFor: a pod first seen while its workload’s leader is being stopped was created mid-handover', () => {
    const stopping = snapshotOf({ deployments: [deployment()], pods: [observed('ctrl-old', { deleting: true })], leases: [lease('ctrl-old')], nodes }, NOW);
    const running = snapshotOf({ deployments: [deployment()], pods: [observed('ctrl-old')], leases: [lease('ctrl-old')], nodes }, NOW);
    const dead = snapshotOf(
      { deployments: [deployment()], pods: [observed('ctrl-old', { gone: true, state: 'terminated' })], leases: [lease('ctrl-old')], nodes },
      NOW,
    );
    const other: V1Pod = { metadata: { namespace: NS, labels: { app: 'other' } } };
    expect([
      handoverPendingFor(stopping, newPod()),
      handoverPendingFor(running, newPod()),
      handoverPendingFor(dead, newPod()),
      handoverPendingFor(stopping, other),
    ]).toEqual([true, false, false, false]);
  });

  it('a holder without a prediction keeps every new pod waiting for the release', () => {
    const two = snapshotOf(
      {
        deployments: [deployment()],
        pods: [
          observed('ctrl-a', { deleting: true }),
          observed('ctrl-b', { deleting: true, node: 'n2' }),
          observed('ctrl-new', { gated: true, waited: 'w', ageMs: 200 }),
        ],
        leases: [lease('ctrl-a'), lease('ctrl-b', { name: 'external-provisioner-leader' })],
        nodes,
      },
      NOW,
    );
    const plan = planWorkload(two, deployment(), NOW, GATE_TIMEOUT, (h) => (h.pod.spec?.nodeName === 'n1' ? NOW - 1 : undefined));
    expect(plan.actions.filter((a) => a.kind === 'lift')).toEqual([]);
  });
});

describe('observeLease (measuring a term)', () => {
  const dep = deployment();
  const nodes = [ready('n1'), ready('n2')];
  const released = (mark?: string): V1Lease => ({
    metadata: { namespace: NS, name: 'l', annotations: mark ? { [RELEASED_BY_OPERATOR]: mark } : {} },
    spec: { holderIdentity: '', leaseDurationSeconds: 1, renewTime: '2026-01-02T03:04:10.500000Z' as unknown as Date },
  });
  const a = observed('ctrl-a');
  const hnOld = observed('ctrl-old', { hostNetwork: true, gone: true, state: 'terminated' });
  const hnNew = observed('ctrl-new', { hostNetwork: true });
  it.each<
    [string, ObservedPod[], V1Lease, { holder: string; pod?: ObservedPod } | undefined, { holderPod?: string; termPod?: string; releasedByOperator?: boolean }]
  >([
    [
      'a renewal of a term whose pod runs: that pod',
      [a],
      lease('ctrl-a'),
      { holder: 'ctrl-a', pod: a },
      { holderPod: 'uid-ctrl-a', releasedByOperator: false },
    ],
    ['a first sighting: the pod the identity names', [a], lease('ctrl-a'), undefined, { holderPod: 'uid-ctrl-a', releasedByOperator: false }],
    [
      'hostNetwork: the old pod dead, the new one on its node renews',
      [hnOld, hnNew],
      lease('n1'),
      { holder: 'n1', pod: hnOld },
      { holderPod: 'uid-ctrl-new', releasedByOperator: false },
    ],
    [
      'our release: the mark is this record’s renewTime',
      [a],
      released('2026-01-02T03:04:10.5Z'),
      { holder: 'ctrl-a', pod: a },
      { holderPod: undefined, releasedByOperator: true },
    ],
    [
      'the holder’s own release after one of ours: an older mark',
      [a],
      released('2026-01-02T03:01:00.000000Z'),
      { holder: 'ctrl-a', pod: a },
      { holderPod: undefined, releasedByOperator: false },
    ],
    ['no mark: the holder released it', [a], released(), { holder: 'ctrl-a', pod: a }, { holderPod: undefined, releasedByOperator: false }],
    [
      'a term whose pod is not known yet: the pod its holder names, even deleted',
      [observed('ctrl-a', { gone: true, state: 'terminated' })],
      released('2026-01-02T03:04:10.5Z'),
      { holder: 'ctrl-a' },
      { termPod: 'uid-ctrl-a', releasedByOperator: true },
    ],
    [
      'a term whose pod is not known, its holder naming two hostNetwork pods: none',
      [hnOld, hnNew],
      lease('n1'),
      { holder: 'n1' },
      { termPod: undefined, holderPod: 'uid-ctrl-new' },
    ],
  ])('%s', (_n, pods, l, term, want) => {
    const s = snapshotOf({ deployments: [dep], pods, leases: [l], nodes }, NOW);
    expect(observeLease(s, l, term)).toMatchObject(want);
  });

  it('the owner of a handover is the driver of the pod that renews now, else of the old holder’s', () => {
    const s = snapshotOf({ deployments: [dep], pods: [observed('ctrl-a', { gone: true, state: 'terminated' })], leases: [], nodes }, NOW);
    const h = { namespace: NS, lease: 'l', oldHolder: 'ctrl-a', newHolder: 'not-seen-yet', releasedBy: 'operator' as const, acquiredAt: NOW };
    expect(handoverOwner(s, h)).toBe('d');
    expect(handoverOwner(s, { ...h, namespace: 'elsewhere' })).toBeUndefined();
  });
});
