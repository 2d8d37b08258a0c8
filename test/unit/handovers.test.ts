import { describe, expect, it } from 'vitest';
import { gapStats, type Handover, handoversFrom, holderSegments, type LeaseObservation, raceOf } from '../../hack/bench/handovers.js';

const obs = (t: number, holder: string, lease = 'l'): LeaseObservation => ({ t, lease, holder });

describe('handoversFrom', () => {
  it('records a direct change of holder with the gap from the old holder’s stop', () => {
    const h = handoversFrom([obs(0, 'a'), obs(5000, 'b')], new Map([['a', 1000]]));
    expect(h).toEqual([{ lease: 'l', oldHolder: 'a', newHolder: 'b', stopAt: 1000, releasedAt: undefined, acquiredAt: 5000, gapMs: 4000 }]);
  });
  it('keeps the release time when the lease went through an empty holder', () => {
    const h = handoversFrom([obs(0, 'a'), obs(2000, ''), obs(2500, 'b')], new Map([['a', 1000]]));
    expect(h[0]).toMatchObject({ oldHolder: 'a', newHolder: 'b', releasedAt: 2000, gapMs: 1500 });
  });
  it('is not a handover when the same holder re-acquires after a release', () => {
    expect(handoversFrom([obs(0, 'a'), obs(1, ''), obs(2, 'a')], new Map())).toEqual([]);
  });
  it('forgets a release once the same holder has re-acquired', () => {
    const h = handoversFrom([obs(0, 'a'), obs(1, ''), obs(2, 'a'), obs(10, 'b')], new Map());
    expect(h).toEqual([expect.objectContaining({ oldHolder: 'a', newHolder: 'b', releasedAt: undefined })]);
  });
  it('ignores repeated observations of the same holder (renewals)', () => {
    expect(handoversFrom([obs(0, 'a'), obs(1, 'a'), obs(2, 'a')], new Map())).toEqual([]);
  });
  it('chains several handovers of one lease and leaves the gap unknown without a stop time', () => {
    const h = handoversFrom([obs(0, 'a'), obs(10, 'b'), obs(20, 'c')], new Map([['b', 15]]));
    expect(h.map((x) => [x.oldHolder, x.newHolder, x.gapMs])).toEqual([
      ['a', 'b', undefined],
      ['b', 'c', 5],
    ]);
  });
  it('keeps leases apart and sorts by acquisition', () => {
    const h = handoversFrom([obs(0, 'a', 'x'), obs(0, 'a', 'y'), obs(30, 'b', 'y'), obs(20, 'b', 'x')], new Map());
    expect(h.map((x) => x.lease)).toEqual(['x', 'y']);
  });
  it('does not count the first holder seen after an initially empty lease as a handover', () => {
    expect(handoversFrom([obs(0, ''), obs(1, 'a')], new Map())).toEqual([]);
  });
});

describe('gapStats', () => {
  it('is undefined for no gaps', () => expect(gapStats([])).toBeUndefined());
  it('uses nearest-rank percentiles', () => {
    expect(gapStats([5, 1, 4, 2, 3])).toEqual({ count: 5, p50: 3, p95: 5, max: 5 });
    expect(gapStats([7])).toEqual({ count: 1, p50: 7, p95: 7, max: 7 });
  });
});

describe('holderSegments', () => {
  it.each([
    ['one holder all along, from the window start', [obs(50, 'a'), obs(60, 'a')], [{ holder: 'a', from: 0, to: 100 }]],
    [
      'a handover through a release',
      [obs(5, 'a'), obs(40, ''), obs(45, 'b')],
      [
        { holder: 'a', from: 0, to: 40 },
        { holder: 'b', from: 45, to: 100 },
      ],
    ],
    [
      'a direct handover',
      [obs(5, 'a'), obs(30, 'b')],
      [
        { holder: 'a', from: 0, to: 30 },
        { holder: 'b', from: 30, to: 100 },
      ],
    ],
    ['released and never taken', [obs(5, 'a'), obs(70, '')], [{ holder: 'a', from: 0, to: 70 }]],
    ['empty at first, then acquired', [obs(5, ''), obs(20, 'b')], [{ holder: 'b', from: 20, to: 100 }]],
    ['other leases ignored', [obs(5, 'a'), obs(10, 'x', 'other')], [{ holder: 'a', from: 0, to: 100 }]],
    ['nothing observed', [], []],
  ] as [string, LeaseObservation[], unknown[]][])('%s', (_name, observations, want) => {
    expect(holderSegments(observations, 'l', 0, 100)).toEqual(want);
  });
});

describe('raceOf (did the acquirer try before the release?)', () => {
  const h: Handover = { lease: 'l', oldHolder: 'a', newHolder: 'b', stopAt: 1000, releasedAt: 1500, acquiredAt: 1600, gapMs: 600 };
  const meta = { mode: 'companion', rollout: 1, newPod: true };
  const log = (t: number, text: string) => ({ t, text });
  it('an attempt after the release is a won race; times are from the pod’s creation', () => {
    const r = raceOf(
      h,
      [log(900, 'I1201 started'), log(1550, 'I1201 leaderelection.go:258] "Attempting to acquire leader lease..." lock="ns/l"')],
      800,
      5000,
      meta,
    );
    expect(r).toMatchObject({ firstAttemptAt: 1550, attemptedFirst: false, waitedForRetry: false, createToAttemptMs: 750, createToAcquireMs: 800, gapMs: 600 });
  });
  it('an attempt before the release is a lost race (older client-go spells it in lower case)', () => {
    const r = raceOf(
      { ...h, acquiredAt: 6300 },
      [log(1200, 'I1201 leaderelection.go:250] attempting to acquire leader lease ns/l...'), log(1300, 'attempting to acquire leader lease again')],
      800,
      5000,
      meta,
    );
    expect(r).toMatchObject({ firstAttemptAt: 1200, attemptedFirst: true, waitedForRetry: true, createToAttemptMs: 400 });
  });
  it('an attempt logged just before the watch saw the release, acquired at once: it found the lease free (no retry)', () => {
    expect(raceOf(h, [log(1450, 'Attempting to acquire leader lease...')], 800, 5000, meta)).toMatchObject({ attemptedFirst: true, waitedForRetry: false });
  });
  it('no release seen (the lease expired): any attempt came first', () => {
    expect(raceOf({ ...h, releasedAt: undefined }, [log(1590, 'Attempting to acquire leader lease...')], 800, 5000, meta).attemptedFirst).toBe(true);
  });
  it('no attempt in the log and no creation time: unknown, not guessed', () => {
    const r = raceOf(h, [log(1000, 'something else')], undefined, 5000, meta);
    expect(r.attemptedFirst).toBeUndefined();
    expect(r.waitedForRetry).toBeUndefined();
    expect(r.createToAttemptMs).toBeUndefined();
    expect(r.createToAcquireMs).toBeUndefined();
  });
});
