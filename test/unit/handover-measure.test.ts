import { describe, expect, it } from 'vitest';
import { formatGap, HandoverTracker } from '../../src/handover/measure.js';

describe('HandoverTracker', () => {
  it('measures a handover released by the operator from the old holder’s stop to the new acquisition', () => {
    const t = new HandoverTracker();
    t.observe('ns/l', 'old', 0);
    t.holderStopping('old', 1000, 900);
    t.operatorReleasing('ns/l');
    expect(t.observe('ns/l', '', 1200)).toBeUndefined(); // the watch may see the release before the write returns
    t.operatorReleaseDone('ns/l', true, 1250);
    const h = t.observe('ns/l', 'new', 1600, '2026-01-01T00:00:01.600000Z');
    expect(h).toEqual({
      lease: 'ns/l', oldHolder: 'old', newHolder: 'new', stopAt: 1000, deletionRequestedAt: 900,
      releasedAt: 1200, releasedBy: 'operator', acquiredAt: 1600, acquireTime: '2026-01-01T00:00:01.600000Z', gapMs: 600,
    });
  });
  it('attributes an empty holder it did not write to the holder itself', () => {
    const t = new HandoverTracker();
    t.observe('l', 'old', 0);
    t.holderStopping('old', 10);
    t.observe('l', '', 20);
    expect(t.observe('l', 'new', 30)).toMatchObject({ releasedBy: 'holder', releasedAt: 20, gapMs: 20 });
  });
  it('calls it expiry when nobody released', () => {
    const t = new HandoverTracker();
    t.observe('l', 'old', 0);
    t.holderStopping('old', 1_000);
    expect(t.observe('l', 'new', 140_000)).toMatchObject({ releasedBy: 'expiry', releasedAt: undefined, gapMs: 139_000 });
  });
  it('does not count a failed release write as a release', () => {
    const t = new HandoverTracker();
    t.observe('l', 'old', 0);
    t.operatorReleasing('l');
    t.operatorReleaseDone('l', false, 5);
    expect(t.observe('l', 'new', 10)).toMatchObject({ releasedBy: 'expiry' });
  });
  it('leaves the gap unknown when the old holder was never told to stop (a standby took over)', () => {
    const t = new HandoverTracker();
    t.observe('l', 'a', 0);
    expect(t.observe('l', 'b', 10)).toMatchObject({ gapMs: undefined, stopAt: undefined });
  });
  it('ignores renewals and a release followed by re-acquisition by the same holder', () => {
    const t = new HandoverTracker();
    t.observe('l', 'a', 0);
    expect(t.observe('l', 'a', 5)).toBeUndefined();
    t.observe('l', '', 6);
    expect(t.observe('l', 'a', 7)).toBeUndefined();
    expect(t.observe('l', 'b', 8)).toMatchObject({ releasedBy: 'expiry', releasedAt: undefined });
  });
  it('keeps the first sighting of a stop', () => {
    const t = new HandoverTracker();
    t.observe('l', 'a', 0);
    t.holderStopping('a', 100);
    t.holderStopping('a', 200);
    expect(t.observe('l', 'b', 300)?.gapMs).toBe(200);
  });
  it('starts measuring only once it has seen a holder', () => {
    const t = new HandoverTracker();
    expect(t.observe('l', '', 0)).toBeUndefined();
    expect(t.observe('l', 'a', 1)).toBeUndefined();
  });
});

describe('formatGap', () => {
  it.each([[420, '0.4s'], [12_340, '12.3s'], [59_999, '60.0s'], [137_000, '2m17s'], [3_600_000, '60m00s']])('%d ms → %s', (ms, s) => expect(formatGap(ms)).toBe(s));
});
