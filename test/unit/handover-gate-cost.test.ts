import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { deletionCostPatch, DELETION_COST } from '../../src/handover/deletion-cost.js';
import { HANDOVER_GATE } from '../../src/api/names.js';
import { liftGatePatch, liftGateWhenNoHandoverPending, withHandoverGate } from '../../src/handover/gate.js';

const created = '2026-01-01T00:00:00Z';
const t0 = Date.parse(created);
const gated: V1Pod = {
  metadata: { name: 'p', creationTimestamp: created as unknown as Date },
  spec: { containers: [], schedulingGates: [{ name: 'other' }, { name: HANDOVER_GATE }] },
};

describe('liftGateWhenNoHandoverPending', () => {
  it.each([
    ['nothing handing over (scale-up, standby replaced) → at once', [], false, 100, { lift: true, reason: 'no-handover-pending' }],
    ['the handover it waited for is done → now', [], true, 800, { lift: true, reason: 'handover-complete' }],
    ['old leader still alive → wait', ['ns/l ← old'], false, 1_000, { lift: false, reason: 'handover-pending' }],
    ['old leader alive past the timeout → lift anyway (fail open)', ['ns/l ← old'], true, 60_000, { lift: true, reason: 'timeout' }],
  ] as const)('%s', (_n, pending, waited, age, want) => {
    expect(liftGateWhenNoHandoverPending(gated, pending, waited, t0 + age, 60_000)).toMatchObject(want);
  });
  it('says what it waits for', () => {
    expect(liftGateWhenNoHandoverPending(gated, ['ns/l ← old'], false, t0, 60_000).message).toBe('waiting for ns/l ← old');
  });
});

describe('withHandoverGate / liftGatePatch', () => {
  it('adds and removes only our gate, and returns the same spec when nothing changes', () => {
    const spec = { containers: [], schedulingGates: [{ name: 'other' }] };
    const added = withHandoverGate(spec, true);
    expect(added.schedulingGates).toEqual([{ name: 'other' }, { name: HANDOVER_GATE }]);
    expect(withHandoverGate(added, true)).toBe(added);
    expect(withHandoverGate(added, false).schedulingGates).toEqual([{ name: 'other' }]);
    expect(withHandoverGate({ containers: [], schedulingGates: [{ name: HANDOVER_GATE }] }, false).schedulingGates).toBeUndefined();
  });
  it('tests the gate is still at its index before removing it', () => {
    expect(liftGatePatch(gated)).toEqual([
      { op: 'test', path: '/spec/schedulingGates/1/name', value: HANDOVER_GATE },
      { op: 'remove', path: '/spec/schedulingGates/1' },
    ]);
    expect(liftGatePatch({ spec: { containers: [] } })).toBeUndefined();
  });
});

describe('deletionCostPatch', () => {
  const pod = (cost?: string): V1Pod => ({ metadata: { annotations: cost === undefined ? {} : { [DELETION_COST]: cost } } });
  it.each([
    ['standby without annotation: nothing to do', undefined, 0, undefined],
    ['new leader of 2 leases', undefined, 2, { metadata: { annotations: { [DELETION_COST]: '100' } } }],
    ['leader unchanged: no write', '100', 2, undefined],
    ['a leader that picks up another lease: no write', '100', 3, undefined],
    ['lost its leases: back to the default', '100', 0, { metadata: { annotations: { [DELETION_COST]: null } } }],
    ['explicit 0 on a standby: fine as it is', '0', 0, undefined],
  ] as const)('%s', (_n, current, leases, want) => expect(deletionCostPatch(pod(current), leases)).toEqual(want));
});
