import type { V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ObservedPod } from '../../src/handover/observed-pod.js';
import { decideRelease, type ReleaseDecision, releaseRecord } from '../../src/handover/release.js';
import { witnessCondition } from '../../src/handover/witness-evidence.js';

const NOW = Date.parse('2026-01-02T03:04:20Z');
const FINISHED = '2026-01-02T03:04:05Z'; // when the old leader's containers finished, on its node's clock

/** A Lease spec as it arrives off the wire: times are strings (the generated type says Date), and a bad object may hold anything. */
interface WireLeaseSpec {
  holderIdentity?: unknown;
  leaseDurationSeconds?: unknown;
  acquireTime?: unknown;
  renewTime?: unknown;
  leaseTransitions?: number;
}
const lease = (spec: WireLeaseSpec | undefined): V1Lease =>
  ({ metadata: { name: 'external-attacher-leader-hostpath-csi-k8s-io', namespace: 'csi' }, ...(spec ? { spec } : {}) }) as unknown as V1Lease;
const held = (over: WireLeaseSpec = {}): V1Lease =>
  lease({
    holderIdentity: 'ctrl-old',
    leaseDurationSeconds: 137,
    acquireTime: '2026-01-02T03:00:00.000000Z',
    renewTime: '2026-01-02T03:04:00.123000Z',
    leaseTransitions: 4,
    ...over,
  });

const pod = (name: string, uid: string, containers: 'running' | 'terminated', deleting: boolean): V1Pod => ({
  metadata: { name, namespace: 'csi', uid, ...(deleting ? { deletionTimestamp: new Date(NOW - 20_000), deletionGracePeriodSeconds: 30 } : {}) },
  spec: { nodeName: 'n1', containers: [{ name: 'csi-attacher' }] },
  status: {
    phase: 'Running',
    containerStatuses: [
      {
        name: 'csi-attacher',
        image: 'img',
        imageID: '',
        ready: containers === 'running',
        restartCount: 0,
        state: containers === 'running' ? { running: {} } : { terminated: { exitCode: 0, finishedAt: new Date(FINISHED) } },
      },
    ],
  },
});
const deadOld: ObservedPod = { pod: pod('ctrl-old', 'u-old', 'terminated', true), gone: true, goneAt: NOW - 10_000 };
const aliveOld: ObservedPod = { pod: pod('ctrl-old', 'u-old', 'running', false), gone: false };
const recreatedOld: ObservedPod = { pod: pod('ctrl-old', 'u-recreated', 'running', false), gone: false };
const fresh: ObservedPod = { pod: pod('ctrl-new', 'u-new', 'running', false), gone: false };
/** Being deleted, the kubelet still reports it running, and the witness of its node saw every container exit at `exitedBy`. */
const witnessed = (exitedBy: string): ObservedPod => {
  const p = pod('ctrl-old', 'u-old', 'running', true);
  p.status = { ...p.status, conditions: [witnessCondition({ exitedBy: Date.parse(exitedBy), node: 'n1' }, 'test', NOW)] };
  return { pod: p, gone: false, witnessed: { exitedBy: Date.parse(exitedBy), node: 'n1' } };
};
/** The witness's condition on the pod, never accepted (judgeEvidence refused it, or no policy was in force). */
const conditionOnly = (exitedBy: string): ObservedPod => {
  const { witnessed: _, ...o } = witnessed(exitedBy);
  return o;
};
/** The same, reported straight to the operator: no condition on the pod (yet). */
const reported = (exitedBy: string, node = 'n1'): ObservedPod => ({
  pod: pod('ctrl-old', 'u-old', 'running', true),
  gone: false,
  witnessed: { exitedBy: Date.parse(exitedBy), node },
});
const nodes = new Map<string, V1Node>([['n1', { metadata: { name: 'n1' }, status: { conditions: [{ type: 'Ready', status: 'True' }] } }]]);

const summary = (d: ReleaseDecision): string => (d.action === 'release' ? `release ${d.pod} ${d.evidence}` : `none ${d.reason}`);

describe('decideRelease', () => {
  it.each<[string, V1Lease, ObservedPod[], string]>([
    ['holder proven dead', held(), [deadOld, fresh], 'release csi/ctrl-old deleted-after-containers-terminated'],
    [
      'holder proven dead, client-go style <pod>_<suffix> identity',
      held({ holderIdentity: 'ctrl-old_5e1c' }),
      [deadOld, fresh],
      'release csi/ctrl-old deleted-after-containers-terminated',
    ],
    [
      'renewTime as a Date (typed client)',
      held({ renewTime: new Date('2026-01-02T03:04:00Z') }),
      [deadOld, fresh],
      'release csi/ctrl-old deleted-after-containers-terminated',
    ],
    [
      'expiring exactly now is not yet expired',
      held({ leaseDurationSeconds: 20, renewTime: '2026-01-02T03:04:00Z' }),
      [deadOld],
      'release csi/ctrl-old deleted-after-containers-terminated',
    ],
    [
      'renewed within the second its last container finished (finishedAt has whole seconds)',
      held({ renewTime: '2026-01-02T03:04:05.900000Z' }),
      [deadOld],
      'release csi/ctrl-old deleted-after-containers-terminated',
    ],
    ['holder alive', held(), [aliveOld, fresh], 'none holder-alive'],
    [
      'renewed after the holder’s containers finished: a re-created pod our cache has not seen',
      held({ renewTime: '2026-01-02T03:04:07Z' }),
      [deadOld],
      'none holder-alive',
    ],
    [
      'witnessed: every container exited after its last renewal',
      held(),
      [witnessed('2026-01-02T03:04:03.500Z'), fresh],
      'release csi/ctrl-old witness-saw-containers-exit',
    ],
    [
      'a witness condition on the pod that was not accepted at intake: not evidence',
      held(),
      [conditionOnly('2026-01-02T03:04:03.500Z'), fresh],
      'none holder-alive',
    ],
    [
      'witnessed, but renewed at the very instant the witness listed its cgroups: not covered',
      held({ renewTime: '2026-01-02T03:04:03.500000Z' }),
      [witnessed('2026-01-02T03:04:03.500Z'), fresh],
      'none holder-alive',
    ],
    [
      'witnessed, but renewed after: a container the witness did not see (started after its listing)',
      held({ renewTime: '2026-01-02T03:04:03.600000Z' }),
      [witnessed('2026-01-02T03:04:03.500Z'), fresh],
      'none holder-alive',
    ],
    [
      'reported straight to the operator: every container exited after its last renewal',
      held(),
      [reported('2026-01-02T03:04:03.500Z'), fresh],
      'release csi/ctrl-old witness-saw-containers-exit',
    ],
    [
      'reported, but renewed after the instant reported',
      held({ renewTime: '2026-01-02T03:04:03.600000Z' }),
      [reported('2026-01-02T03:04:03.500Z'), fresh],
      'none holder-alive',
    ],
    ['reported for another node than the pod’s', held(), [reported('2026-01-02T03:04:03.500Z', 'n2'), fresh], 'none holder-alive'],
    [
      'reported, but the pod is not being deleted (the kubelet says running)',
      held(),
      [{ ...aliveOld, witnessed: { exitedBy: Date.parse('2026-01-02T03:04:03.500Z'), node: 'n1' } }, fresh],
      'none holder-alive',
    ],
    ['released by its holder (client-go release record)', held({ holderIdentity: '', leaseDurationSeconds: 1 }), [deadOld], 'none released-by-holder'],
    ['no holder', held({ holderIdentity: '' }), [deadOld], 'none not-held'],
    ['already expired by its own record', held({ leaseDurationSeconds: 15, renewTime: '2026-01-02T03:04:00Z' }), [deadOld], 'none expired'],
    ['holder unknown', held({ holderIdentity: 'somebody-else' }), [deadOld, fresh], 'none unresolved-holder'],
    ['holder ambiguous: deleted pod and its re-created namesake', held(), [deadOld, recreatedOld], 'none unresolved-holder'],
    ['malformed: renewTime garbage', held({ renewTime: 'yesterday-ish' }), [deadOld], 'none malformed-lease'],
    ['malformed: renewTime not RFC 3339', held({ renewTime: 'Jan 2 2026 03:04:00' }), [deadOld], 'none malformed-lease'],
    ['malformed: renewTime missing', held({ renewTime: undefined }), [deadOld], 'none malformed-lease'],
    ['malformed: spec missing', lease(undefined), [deadOld], 'none malformed-lease'],
    ['malformed: holderIdentity missing', held({ holderIdentity: undefined }), [deadOld], 'none malformed-lease'],
    ['malformed: leaseDurationSeconds 0', held({ leaseDurationSeconds: 0 }), [deadOld], 'none malformed-lease'],
    ['malformed: leaseDurationSeconds not an integer', held({ leaseDurationSeconds: 1.5 }), [deadOld], 'none malformed-lease'],
  ])('%s', (_case, l, pods, want) => {
    expect(summary(decideRelease(l, pods, nodes, NOW))).toBe(want);
  });

  it('names the holder, the pod and the evidence of a release', () => {
    expect(decideRelease(held(), [deadOld, fresh], nodes, NOW)).toEqual({
      action: 'release',
      holder: 'ctrl-old',
      pod: 'csi/ctrl-old',
      evidence: 'deleted-after-containers-terminated',
      message: expect.stringContaining('csi/external-attacher-leader-hostpath-csi-k8s-io'),
    });
  });

  it.each<[string, V1Lease, ObservedPod[], string]>([
    ['holder-alive carries the verdict’s reason', held(), [aliveOld], 'containers-running'],
    ['unresolved-holder carries the resolution’s reason', held(), [deadOld, recreatedOld], 'ambiguous-identity'],
    ['expired says when', held({ leaseDurationSeconds: 15, renewTime: '2026-01-02T03:04:00Z' }), [], '2026-01-02T03:04:15.000000Z'],
  ])('%s', (_case, l, pods, fragment) => {
    expect(decideRelease(l, pods, nodes, NOW)).toMatchObject({ action: 'none', holder: 'ctrl-old', message: expect.stringContaining(fragment) });
  });
});

describe('releaseRecord', () => {
  it.each([
    ['keeps the transitions', 4, 4],
    ['a lease without transitions has 0, as client-go reads it', undefined, 0],
  ])('writes client-go’s release record: %s', (_case, transitions, want) => {
    const now = Date.parse('2026-01-02T03:04:05.678Z');
    expect(releaseRecord({ holderIdentity: 'ctrl-old', leaseDurationSeconds: 137, leaseTransitions: transitions }, now)).toEqual({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: '2026-01-02T03:04:05.678000Z',
      renewTime: '2026-01-02T03:04:05.678000Z',
      leaseTransitions: want,
    });
  });
});
