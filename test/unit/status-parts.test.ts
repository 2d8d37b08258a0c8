import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../../src/kube/errors.js';
import { classifyWriteFailure, partKey, partsToSend, type StatusPart, statusOf } from '../../src/status/status-parts.js';
import { statusUpToDate } from '../../src/controller/clustercsidriver/reconcile.js';
import { driverConditions, lastHandoverSummary, PROGRESSING, type DriverObservation } from '../../src/status/conditions.js';
import { withHandover } from '../../src/handover/report.js';

const cond = (type: string, message = 'm') => ({ type, status: 'True' as const, reason: 'R', message, lastTransitionTime: '2026-12-05T00:00:00Z' });
const core: StatusPart = { name: 'conditions', required: true, conditions: [cond('CSIHandoverAvailable'), cond('CSIHandoverDegraded')] };
const handedOver: StatusPart = { name: 'condition CSIHandoverLeasesHandedOver', required: false, conditions: [cond('CSIHandoverLeasesHandedOver')] };
const generations: StatusPart = {
  name: 'generations',
  required: false,
  fields: { generations: [{ group: 'apps', resource: 'deployments', namespace: 'n', name: 'c', lastGeneration: 2 }] },
};
const observed: StatusPart = { name: 'observedGeneration', required: false, fields: { observedGeneration: 3 } };

describe('a status in parts', () => {
  it('puts the parts together: conditions in order, fields merged', () => {
    expect(statusOf([core, handedOver, observed, generations])).toEqual({
      conditions: [...(core.conditions ?? []), ...(handedOver.conditions ?? [])],
      observedGeneration: 3,
      generations: generations.fields?.generations,
    });
    expect(statusOf([observed])).toEqual({ observedGeneration: 3 });
  });

  it('knows a part by its name and content: new content is a new part', () => {
    expect(partKey(handedOver)).toBe(partKey({ ...handedOver, conditions: [cond('CSIHandoverLeasesHandedOver')] }));
    expect(partKey(handedOver)).not.toBe(partKey({ ...handedOver, conditions: [cond('CSIHandoverLeasesHandedOver', 'a new gap')] }));
    expect(partKey(observed)).not.toBe(partKey({ ...observed, fields: { observedGeneration: 4 } }));
  });

  it("does not take a condition's transition time for new content: a refused condition is dated anew by every reconcile", () => {
    const redated = { ...cond('CSIHandoverLeasesHandedOver'), lastTransitionTime: '2026-12-05T00:00:09Z' };
    expect(partKey(handedOver)).toBe(partKey({ ...handedOver, conditions: [redated] }));
    expect(partsToSend([core, { ...handedOver, conditions: [redated] }], new Set([partKey(handedOver)]))).toEqual([core]);
  });

  it.each([
    ['nothing refused', [], ['conditions', 'condition CSIHandoverLeasesHandedOver', 'generations']],
    ['an optional part refused with this content', [partKey(handedOver)], ['conditions', 'generations']],
    [
      'an optional part refused with other content',
      [partKey({ ...handedOver, conditions: [cond('CSIHandoverLeasesHandedOver', 'old')] })],
      ['conditions', 'condition CSIHandoverLeasesHandedOver', 'generations'],
    ],
    ['the required part refused', [partKey(core)], undefined],
  ])('sends, with %s, %j', (_n, refused, want) => {
    expect(partsToSend([core, handedOver, generations], new Set(refused))?.map((p) => p.name)).toEqual(want);
  });

  it.each([
    [new KubeApiError(500, 'InternalError', 'PATCH', '/x/status', '.status.handover: field not declared in schema'), 'schema'],
    [new KubeApiError(422, 'Invalid', 'PATCH', '/x/status', 'status.conditions[0].status: Unsupported value'), 'invalid'],
    [new KubeApiError(403, 'Forbidden', 'PATCH', '/x/status', 'ValidatingAdmissionPolicy denied request'), 'forbidden'],
    [new KubeApiError(404, 'NotFound', 'PATCH', '/x/status', 'not found'), 'not-found'],
    [new KubeApiError(400, 'BadRequest', 'PATCH', '/x/status', 'bad'), 'bad-request'],
    [new KubeApiError(500, 'InternalError', 'PATCH', '/x/status', 'etcdserver: request timed out'), 'transient'],
    [new KubeApiError(429, 'TooManyRequests', 'PATCH', '/x/status', 'slow down'), 'transient'],
    [new KubeApiError(409, 'Conflict', 'PATCH', '/x/status', 'conflict'), 'transient'],
    [new Error('ECONNRESET'), 'transient'],
  ])('%s is %s', (err, want) => expect(classifyWriteFailure(err)).toBe(want));

  it('reads a CR as up to date by our conditions (not their times) and our fields only', () => {
    const current = { conditions: [cond('CSIHandoverAvailable'), cond('Other')], observedGeneration: 3, generations: generations.fields?.generations as never };
    const want = statusOf([{ ...core, conditions: [{ ...cond('CSIHandoverAvailable'), lastTransitionTime: 'later' }] }, observed, generations]);
    expect(statusUpToDate(want, current)).toBe(true);
    expect(statusUpToDate(statusOf([core]), current)).toBe(false); // CSIHandoverDegraded missing
    expect(statusUpToDate(statusOf([{ ...observed, fields: { observedGeneration: 4 } }]), current)).toBe(false);
    expect(
      statusUpToDate(
        statusOf([{ ...generations, fields: { generations: [{ group: 'apps', resource: 'deployments', namespace: 'n', name: 'c', lastGeneration: 3 }] } }]),
        current,
      ),
    ).toBe(false);
  });
});

describe('the last handover at a glance', () => {
  const record = {
    namespace: 'csi',
    lease: 'attacher',
    oldHolder: 'a',
    newHolder: 'b',
    releasedBy: 'operator' as const,
    acquiredAt: 1_000,
    stopAt: 0,
    releasedAt: 500,
    gapMs: 1_000,
  };
  const observation: DriverObservation = {
    managementState: 'Managed',
    selector: 'csi-handover.io/driver=d',
    namespaces: 'any namespace',
    workloads: [{ workload: 'Deployment n/c', minimumAvailable: true, complete: true } as never],
    unparsable: [],
    notAtTarget: [],
    targetVerbosity: 4,
    syncErrors: [],
  };

  it('says how many leases the last handovers moved and the largest gap', () => {
    expect(lastHandoverSummary(undefined)).toBeUndefined();
    const r = withHandover(withHandover(undefined, record), { ...record, lease: 'provisioner', gapMs: 3_200 });
    expect(lastHandoverSummary(r)).toBe('last handover: 2 lease(s), largest gap 3.2s');
  });

  it('puts it in Progressing=False once the rollout is done, not while it rolls', () => {
    const r = withHandover(undefined, record);
    const done = driverConditions(observation, r, [], '2026-12-05T00:00:00Z').find((c) => c.type === PROGRESSING);
    expect(done).toMatchObject({ status: 'False', message: 'all workloads at --v=4 and rolled out; last handover: 1 lease(s), largest gap 1.0s' });
    const rolling = { ...observation, workloads: [{ workload: 'Deployment n/c', minimumAvailable: true, complete: false } as never] };
    expect(driverConditions(rolling, r, [], '2026-12-05T00:00:00Z').find((c) => c.type === PROGRESSING)?.message).not.toContain('last handover');
  });
});
