import { describe, expect, it } from 'vitest';
import type { Handover } from '../../hack/bench/handovers.js';
import { type FreedBy, formatSoak, type SoakRollout, soakSummary } from '../../hack/bench/soak-summary.js';
import type { Violation } from '../../hack/lib/invariants.js';

const T0 = Date.parse('2026-12-02T10:00:00Z');
const rollout = (index: number, fault: string, from: number, to: number): SoakRollout => ({
  index,
  fault,
  startedAt: T0 + from * 1000,
  endedAt: T0 + to * 1000,
});
const handover = (at: number, gapMs: number | undefined, freedBy: FreedBy): Handover & { freedBy: FreedBy } => ({
  lease: 'l',
  oldHolder: 'a',
  newHolder: 'b',
  acquiredAt: T0 + at * 1000,
  gapMs,
  freedBy,
});

describe('soakSummary', () => {
  const rollouts = [rollout(1, 'none', 0, 10), rollout(2, 'force-delete', 11, 40), rollout(3, 'none', 41, 50)];
  const handovers = [
    handover(5, 500, 'operator'),
    handover(30, 16_000, 'expiry'),
    handover(35, 17_000, 'expiry'),
    handover(45, 700, 'operator'),
    handover(49, undefined, 'holder'),
  ];

  it('counts rollouts by fault, handovers by who freed the lease, and expiry fallbacks by the fault of their rollout', () => {
    const s = soakSummary(rollouts, handovers, []);
    expect(s.rollouts).toBe(3);
    expect(s.seconds).toBe(50);
    expect(s.byFault).toEqual({ none: 2, 'force-delete': 1 });
    expect(s.secondsByFault).toEqual({ none: { p50: 9, max: 10 }, 'force-delete': { p50: 29, max: 29 } });
    expect(s.handovers).toBe(5);
    expect(s.freedBy).toEqual({ operator: 2, holder: 1, expiry: 2 });
    expect(s.expiryByFault).toEqual({ 'force-delete': 2 });
  });

  it('gap percentiles over the handovers with a known stop (nearest rank)', () => {
    expect(soakSummary(rollouts, handovers, []).gapMs).toEqual({ p50: 700, p99: 17_000, max: 17_000 });
    expect(soakSummary(rollouts, [], []).gapMs).toBeUndefined();
  });

  it('keeps what was left behind apart from the other violations, and prints both', () => {
    const v = (invariant: Violation['invariant']): Violation => ({ invariant, at: T0, subject: 'ns/x', message: 'm' });
    const s = soakSummary(rollouts, handovers, [v('two-leaders'), v('left-behind')]);
    expect(s.violations.map((x) => x.invariant)).toEqual(['two-leaders']);
    expect(s.leftBehind.map((x) => x.invariant)).toEqual(['left-behind']);
    const text = formatSoak(s);
    expect(text).toContain('invariant violations: 1');
    expect(text).toContain('two-leaders ns/x: m');
    expect(text).toContain('left behind: ns/x: m');
    expect(formatSoak(soakSummary(rollouts, handovers, []))).toContain('left behind: nothing');
  });
});
