import { describe, expect, it } from 'vitest';
import { formatGap, HandoverTracker, type LeaseObservation } from '../../src/handover/measure.js';

const L = { namespace: 'ns', name: 'l' };
const held = (holder: string, holderPod?: string): LeaseObservation => ({ holder, holderPod });
const vacant: LeaseObservation = { holder: '' };

describe('HandoverTracker', () => {
  it('measures a handover released by the operator from the old holder’s stop to the new acquisition', () => {
    const t = new HandoverTracker();
    t.observe(L, held('old', 'uid-old'), 0);
    t.podStopping('uid-old', 1000, 900);
    expect(t.observe(L, { holder: '', releasedByOperator: true }, 1200)).toBeUndefined();
    const h = t.observe(L, { holder: 'new', holderPod: 'uid-new', acquireTime: '2026-01-01T00:00:01.600000Z' }, 1600);
    expect(h).toEqual({
      namespace: 'ns',
      lease: 'l',
      oldHolder: 'old',
      newHolder: 'new',
      oldPod: 'uid-old',
      newPod: 'uid-new',
      stopAt: 1000,
      deletionRequestedAt: 900,
      releasedAt: 1200,
      releasedBy: 'operator',
      acquiredAt: 1600,
      acquireTime: '2026-01-01T00:00:01.600000Z',
      gapMs: 600,
    });
  });

  it('finds the stop of a <pod>_<suffix> holder: stops are kept by pod, not by identity', () => {
    const t = new HandoverTracker();
    t.observe(L, held('ctrl-1_8c1f', 'uid-1'), 0);
    t.podStopping('uid-1', 10);
    expect(t.observe(L, held('ctrl-2_77aa', 'uid-2'), 30)).toMatchObject({ oldHolder: 'ctrl-1_8c1f', newHolder: 'ctrl-2_77aa', gapMs: 20 });
  });

  it('learns the holder’s pod from a later renewal when the first sighting could not tell', () => {
    const t = new HandoverTracker();
    t.observe(L, held('a'), 0);
    t.observe(L, held('a', 'uid-a'), 5);
    t.podStopping('uid-a', 10);
    expect(t.observe(L, held('b', 'uid-b'), 40)?.gapMs).toBe(30);
  });

  it('a term whose pod was never learned from a renewal takes it from the handover’s observation (its stop, its gap)', () => {
    const t = new HandoverTracker();
    t.observe(L, held('a'), 0); // first seen before the pod informer had the pod
    t.podStopping('uid-a', 10);
    expect(t.observe(L, { holder: '', releasedByOperator: true, termPod: 'uid-a' }, 20)).toBeUndefined();
    expect(t.observe(L, held('b', 'uid-b'), 40)).toMatchObject({ oldPod: 'uid-a', stopAt: 10, releasedBy: 'operator', gapMs: 30 });
  });

  it('attributes an empty holder it did not write to the holder itself', () => {
    const t = new HandoverTracker();
    t.observe(L, held('old', 'u'), 0);
    t.podStopping('u', 10);
    t.observe(L, vacant, 20);
    expect(t.observe(L, held('new'), 30)).toMatchObject({ releasedBy: 'holder', releasedAt: 20, gapMs: 20 });
  });

  it('calls it expiry when nobody released', () => {
    const t = new HandoverTracker();
    t.observe(L, held('old', 'u'), 0);
    t.podStopping('u', 1_000);
    expect(t.observe(L, held('new'), 140_000)).toMatchObject({ releasedBy: 'expiry', releasedAt: undefined, gapMs: 139_000 });
  });

  it('a later release by the holder, after one of ours on an earlier term, is the holder’s', () => {
    const t = new HandoverTracker();
    t.observe(L, held('a'), 0);
    t.observe(L, { holder: '', releasedByOperator: true }, 5);
    t.observe(L, held('b'), 10);
    t.observe(L, vacant, 20);
    expect(t.observe(L, held('c'), 30)).toMatchObject({ oldHolder: 'b', releasedBy: 'holder', releasedAt: 20 });
  });

  it('leaves the gap unknown when the old holder was never told to stop (a standby took over)', () => {
    const t = new HandoverTracker();
    t.observe(L, held('a', 'ua'), 0);
    expect(t.observe(L, held('b', 'ub'), 10)).toMatchObject({ gapMs: undefined, stopAt: undefined });
  });

  it('a renewal is no handover, also while the renewing pod cannot be told (two hostNetwork pods on one node)', () => {
    const t = new HandoverTracker();
    t.observe(L, held('node-1', 'ua'), 0);
    expect(t.observe(L, held('node-1', 'ua'), 5)).toBeUndefined();
    expect(t.observe(L, held('node-1'), 6)).toBeUndefined();
  });

  it('a release followed by re-acquisition under the same identity is a new term', () => {
    const t = new HandoverTracker();
    t.observe(L, held('node-1', 'ua'), 0);
    t.podStopping('ua', 100);
    t.observe(L, vacant, 300);
    expect(t.observe(L, held('node-1', 'ub'), 900)).toMatchObject({ oldHolder: 'node-1', newHolder: 'node-1', releasedBy: 'holder', gapMs: 800 });
    expect(t.observe(L, held('node-1', 'ub'), 950)).toBeUndefined();
  });

  it('the same identity renewing from another pod (hostNetwork, same node) is a new term, measured from the old pod’s stop', () => {
    const t = new HandoverTracker();
    t.observe(L, held('node-1', 'ua'), 0);
    t.podStopping('ua', 1_000);
    expect(t.observe(L, held('node-1'), 1_500)).toBeUndefined(); // ua and ub both may run: cannot tell
    expect(t.observe(L, held('node-1', 'ub'), 3_000)).toMatchObject({ oldHolder: 'node-1', newHolder: 'node-1', releasedBy: 'expiry', gapMs: 2_000 });
  });

  it('keeps the first sighting of a stop', () => {
    const t = new HandoverTracker();
    t.observe(L, held('a', 'ua'), 0);
    t.podStopping('ua', 100);
    t.podStopping('ua', 200);
    expect(t.observe(L, held('b'), 300)?.gapMs).toBe(200);
  });

  it('keeps leases of the same name in two namespaces apart', () => {
    const t = new HandoverTracker();
    const other = { namespace: 'other', name: 'l' };
    t.observe(L, held('a', 'ua'), 0);
    t.observe(other, held('x', 'ux'), 0);
    t.podStopping('ux', 50);
    expect(t.observe(L, held('b'), 100)).toMatchObject({ namespace: 'ns', oldHolder: 'a', gapMs: undefined });
    expect(t.observe(other, held('y'), 100)).toMatchObject({ namespace: 'other', oldHolder: 'x', gapMs: 50 });
  });

  it('starts measuring only once it has seen a holder, and forgets a deleted lease', () => {
    const t = new HandoverTracker();
    expect(t.observe(L, vacant, 0)).toBeUndefined();
    expect(t.observe(L, held('a'), 1)).toBeUndefined();
    t.forget(L);
    expect(t.observe(L, held('b'), 2)).toBeUndefined();
  });

  it('prunes old stops of pods no lease is held by, and keeps the holder’s', () => {
    const t = new HandoverTracker();
    t.observe(L, held('a', 'ua'), 0);
    t.podStopping('ua', 10);
    t.podStopping('gone', 20);
    t.prune(1_000);
    t.observe({ namespace: 'ns', name: 'm' }, held('g', 'gone'), 30);
    expect(t.observe({ namespace: 'ns', name: 'm' }, held('h'), 40)?.gapMs).toBeUndefined();
    expect(t.observe(L, held('b'), 50)?.gapMs).toBe(40);
  });
});

describe('formatGap', () => {
  it.each([
    [420, '0.4s'],
    [12_340, '12.3s'],
    [59_999, '60.0s'],
    [137_000, '2m17s'],
    [3_600_000, '60m00s'],
  ])('%d ms → %s', (ms, s) => expect(formatGap(ms)).toBe(s));
});
