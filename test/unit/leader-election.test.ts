import { describe, expect, it } from 'vitest';
import { decide, jitteredRetry, recordChanged, renewDeadlinePassed } from '../../src/leaderelection/decide.js';
import { acquiredRecord, LeaseObject, type LeaseRecord, microTime, releasedRecord } from '../../src/leaderelection/lease-record.js';

const rec = (holder: string, durationS = 15, extra: Partial<LeaseRecord> = {}): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: durationS,
  acquireTime: 'a',
  renewTime: 'r',
  leaseTransitions: 3,
  ...extra,
});
const timings = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };

describe('decide', () => {
  it.each([
    ['no lease yet → create it', undefined, 1000, { kind: 'create' }],
    ['our own lease → renew', { record: rec('me'), observedAt: 0 }, 1000, { kind: 'renew' }],
    ['released (empty holder) → acquire at once', { record: rec('', 1), observedAt: 999 }, 1000, { kind: 'acquire' }],
    [
      'another holder, observed 14s ago → wait until 15s after the observation',
      { record: rec('other'), observedAt: 0 },
      14_000,
      { kind: 'wait', retryAt: 15_000, holder: 'other' },
    ],
    ['another holder, exactly at expiry → still wait', { record: rec('other'), observedAt: 0 }, 15_000, { kind: 'wait', retryAt: 15_000, holder: 'other' }],
    ['another holder, unchanged past its duration → acquire', { record: rec('other'), observedAt: 0 }, 15_001, { kind: 'acquire' }],
  ] as const)('%s', (_name, observed, now, want) => {
    expect(decide('me', observed, now)).toEqual(want);
  });

  it('times expiry from our observation, not from the holder’s renewTime', () => {
    // The holder's clock says it renewed long ago, but we only just saw the record change: wait.
    const observed = { record: rec('other', 15, { renewTime: microTime(0) }), observedAt: 100_000 };
    expect(decide('me', observed, 100_500).kind).toBe('wait');
  });
});

describe('renew deadline and retry', () => {
  it('gives up leadership only once the renew deadline has passed', () => {
    expect(renewDeadlinePassed(0, 9_999, timings)).toBe(false);
    expect(renewDeadlinePassed(0, 10_000, timings)).toBe(true);
  });
  it('jitters the retry within [retry, 2.2 × retry]', () => {
    expect(jitteredRetry(timings, 0)).toBe(2_000);
    expect(jitteredRetry(timings, 1)).toBeCloseTo(4_400);
  });
  it('notices any change of the record', () => {
    expect(recordChanged(undefined, rec('a'))).toBe(true);
    expect(recordChanged(rec('a'), rec('a'))).toBe(false);
    expect(recordChanged(rec('a'), rec('a', 15, { renewTime: 'r2' }))).toBe(true);
  });
});

describe('lease records', () => {
  it('creates a fresh lease with zero transitions', () => {
    expect(acquiredRecord(undefined, 'me', 15, 0)).toMatchObject({ holderIdentity: 'me', leaseDurationSeconds: 15, leaseTransitions: 0 });
  });
  it('counts a transition when taking over from someone else, or from a release', () => {
    expect(acquiredRecord(rec('other'), 'me', 15, 0).leaseTransitions).toBe(4);
    expect(acquiredRecord(rec(''), 'me', 15, 0).leaseTransitions).toBe(4);
  });
  it('keeps acquireTime and transitions on renewal', () => {
    const renewed = acquiredRecord(rec('me', 15, { acquireTime: 'first' }), 'me', 15, 5_000);
    expect(renewed).toMatchObject({ acquireTime: 'first', leaseTransitions: 3, renewTime: microTime(5_000) });
  });
  it('releases as client-go does: empty holder, 1s, times now, transitions unchanged', () => {
    expect(releasedRecord(rec('me'), 0)).toEqual({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: microTime(0),
      renewTime: microTime(0),
      leaseTransitions: 3,
    });
  });
  it('writes MicroTime with microseconds', () => {
    expect(microTime(Date.parse('2026-01-02T03:04:05.678Z'))).toBe('2026-01-02T03:04:05.678000Z');
  });
  it('accepts a lease with a missing spec and rejects one without a resourceVersion', () => {
    expect(LeaseObject.parse({ metadata: { name: 'x', resourceVersion: '1' } }).spec.holderIdentity).toBe('');
    expect(LeaseObject.safeParse({ metadata: { name: 'x' }, spec: {} }).success).toBe(false);
    expect(LeaseObject.safeParse({ metadata: { name: 'x', resourceVersion: '1' }, spec: { leaseDurationSeconds: 'long' } }).success).toBe(false);
  });
});
