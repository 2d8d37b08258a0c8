import { describe, expect, it } from 'vitest';
import { checkGates, checkLeases, containersRunningAt, type LeaseSample, type PodSample } from '../../hack/lib/invariants.js';
import type { NodeEvent } from '../../hack/lib/node-events.js';

const T0 = Date.parse('2026-12-02T10:00:00Z');
const iso = (s: number) => new Date(T0 + s * 1000).toISOString();
const NS = 'csi-hostpath';

const started = (pod: string, container: string, s: number): NodeEvent => ({
  t: iso(s),
  node: 'node-1',
  namespace: NS,
  pod,
  uid: `uid-${pod}`,
  container,
  event: 'container-started',
});
const exited = (pod: string, container: string, s: number): NodeEvent => ({ ...started(pod, container, s), event: 'container-exited', exitCode: 0 });

/** A lease record seen at second `s` (stamped by its writer at the same second unless said otherwise). */
function lease(s: number, holder: string, extra: Partial<LeaseSample> = {}): LeaseSample {
  return {
    t: T0 + s * 1000,
    namespace: NS,
    lease: 'l',
    holder,
    renewTime: iso(s),
    acquireTime: iso(s),
    leaseDurationSeconds: 15,
    releasedByOperator: false,
    ...extra,
  };
}

describe('containersRunningAt', () => {
  const events = [started('a', 'x', 0), started('a', 'y', 0), exited('a', 'x', 10), started('a', 'x', 12), exited('a', 'y', 20)];
  it('follows each container from its start to its exit, restarts included', () => {
    expect(containersRunningAt(events, NS, 'a', T0 + 5_000)).toEqual(['x', 'y']);
    expect(containersRunningAt(events, NS, 'a', T0 + 11_000)).toEqual(['y']);
    expect(containersRunningAt(events, NS, 'a', T0 + 15_000)).toEqual(['x', 'y']);
    expect(containersRunningAt(events, NS, 'a', T0 + 25_000)).toEqual(['x']);
  });
  it('knows only its own pod and namespace, and nothing before a start', () => {
    expect(containersRunningAt(events, NS, 'b', T0 + 5_000)).toEqual([]);
    expect(containersRunningAt(events, 'other', 'a', T0 + 5_000)).toEqual([]);
    expect(containersRunningAt(events, NS, 'a', T0 - 1_000)).toEqual([]);
  });
});

describe('checkLeases', () => {
  const oldPod = [started('old', 'sidecar', 0), exited('old', 'sidecar', 30)];

  it('an operator release after the holder exited, then the new holder: no violation', () => {
    const samples = [lease(1, 'old'), lease(29, 'old'), lease(31, '', { releasedByOperator: true }), lease(32, 'new')];
    expect(checkLeases(samples, oldPod)).toEqual([]);
  });

  it('an operator release while a container of the holder still ran is a violation, and so is the new holder taking it', () => {
    const samples = [lease(1, 'old'), lease(20, 'old'), lease(25, '', { releasedByOperator: true }), lease(26, 'new')];
    const v = checkLeases(samples, oldPod);
    expect(v.map((x) => x.invariant)).toEqual(['release-while-running', 'two-leaders']);
    expect(v[0]?.message).toContain('sidecar');
    expect(v[0]?.at).toBe(T0 + 25_000);
  });

  it('the holder releasing itself while it exits is its own business', () => {
    const samples = [lease(1, 'old'), lease(29.9, ''), lease(29.95, 'new')];
    expect(checkLeases(samples, oldPod)).toEqual([]);
  });

  it('a takeover after the old lease ran out is not two leaders, even if the old pod still runs', () => {
    const samples = [lease(1, 'old'), lease(5, 'old'), lease(21, 'new')]; // valid until 20
    expect(checkLeases(samples, oldPod)).toEqual([]);
  });

  it('a takeover of a lease that is still valid while the old holder runs is two leaders', () => {
    const samples = [lease(1, 'old'), lease(10, 'old'), lease(12, 'new')];
    expect(checkLeases(samples, oldPod).map((x) => x.invariant)).toEqual(['two-leaders']);
  });

  it("judges by the records' own times (renewTime, acquireTime), not when the watch delivered them", () => {
    // The release was written at 31 (after the exit at 30) but seen late; the new holder acquired at 32.
    const samples = [lease(1, 'old'), lease(40, '', { renewTime: iso(31), releasedByOperator: true }), lease(41, 'new', { acquireTime: iso(32) })];
    expect(checkLeases(samples, oldPod)).toEqual([]);
    // Written at 25 and seen at 40: still a violation at 25.
    const early = [lease(1, 'old'), lease(40, '', { renewTime: iso(25), releasedByOperator: true })];
    expect(checkLeases(early, oldPod).map((x) => [x.invariant, x.at])).toEqual([['release-while-running', T0 + 25_000]]);
  });

  it('re-acquisition by the same holder and renewals are nothing; samples after `until` are not judged yet', () => {
    const samples = [lease(1, 'old'), lease(20, '', { releasedByOperator: true }), lease(21, 'old')];
    expect(checkLeases(samples, oldPod).map((x) => x.invariant)).toEqual(['release-while-running']);
    expect(checkLeases(samples, oldPod, T0 + 10_000)).toEqual([]);
  });

  it('keeps leases apart', () => {
    const other = (s: LeaseSample): LeaseSample => ({ ...s, lease: 'm' });
    const samples = [lease(1, 'old'), other(lease(2, 'new')), lease(31, 'new')];
    expect(checkLeases(samples, oldPod)).toEqual([]);
  });
});

describe('checkGates', () => {
  const pod = (s: number, extra: Partial<PodSample>): PodSample => ({
    t: T0 + s * 1000,
    namespace: NS,
    name: 'p',
    uid: 'u',
    created: T0,
    gated: false,
    deleted: false,
    ...extra,
  });
  const c = { gateTimeoutMs: 60_000, slackMs: 5_000, now: T0 + 120_000, final: true };

  it('a pod let go in time, its state saying how it started: nothing', () => {
    expect(checkGates([pod(0, { gated: true, state: 'waiting for x' }), pod(3, { state: 'started: x released' })], c)).toEqual([]);
  });

  it('let go after the timeout (and its allowance) is a violation', () => {
    const v = checkGates([pod(0, { gated: true }), pod(66, {})], c);
    expect(v.map((x) => x.invariant)).toEqual(['gate-held-too-long']);
  });

  it("an API server outage while gated extends the allowance by the outage and the operator's retry cap", () => {
    const samples = [pod(0, { gated: true }), pod(80, {})];
    expect(checkGates(samples, { ...c, outages: [{ from: T0 + 10_000, to: T0 + 20_000 }], retryAfterOutageMs: 10_000 })).toEqual([]);
    // An outage outside the pod's wait gives nothing.
    expect(checkGates(samples, { ...c, outages: [{ from: T0 + 90_000, to: T0 + 99_000 }], retryAfterOutageMs: 10_000 })).toHaveLength(1);
    // Nor does a short one make up for a long delay.
    expect(
      checkGates([pod(0, { gated: true }), pod(90, {})], { ...c, outages: [{ from: T0 + 10_000, to: T0 + 20_000 }], retryAfterOutageMs: 10_000 }),
    ).toHaveLength(1);
  });

  it('a pod deleted while gated was let go', () => {
    expect(checkGates([pod(0, { gated: true }), pod(10, { gated: true, deleted: true })], c)).toEqual([]);
  });

  it('at the end: a gate or a waiting state on a live pod is left behind', () => {
    const stillGated = checkGates([pod(0, { gated: true })], { ...c, now: T0 + 10_000 });
    expect(stillGated.map((x) => x.invariant)).toEqual(['left-behind']);
    const waiting = checkGates([pod(0, { state: 'waiting for x' })], c);
    expect(waiting.map((x) => x.invariant)).toEqual(['left-behind']);
    expect(checkGates([pod(0, { state: 'waiting for x' })], { ...c, final: false })).toEqual([]);
  });

  it('still gated past the timeout is overdue even before the end', () => {
    expect(checkGates([pod(0, { gated: true })], { ...c, final: false }).map((x) => x.invariant)).toEqual(['gate-held-too-long']);
  });
});
