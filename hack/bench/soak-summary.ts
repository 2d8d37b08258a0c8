// The soak's summary, a pure function of what it did and what the observer saw (unit-tested in
// test/unit/soak-summary.test.ts): rollouts by fault, handovers with their gaps, how many fell back to expiry and
// under which fault, the violations (must be none) and what was left behind (must be nothing).
import type { Violation } from '../lib/invariants.js';
import type { Handover } from './handovers.js';

export interface SoakRollout {
  index: number;
  /** the fault injected during it, or 'none' */
  fault: string;
  /** what the fault did, in words */
  did?: string;
  startedAt: number;
  /** when every lease was held by the new pod */
  endedAt: number;
}

export type FreedBy = 'operator' | 'holder' | 'expiry';

export interface SoakSummary {
  rollouts: number;
  seconds: number;
  byFault: Record<string, number>;
  /** how long a rollout took (asked for → every lease held by the new pod), by fault: seconds */
  secondsByFault: Record<string, { p50: number; max: number }>;
  handovers: number;
  gapMs?: { p50: number; p99: number; max: number };
  freedBy: Record<FreedBy, number>;
  /** handovers that waited for expiry, by the fault of their rollout */
  expiryByFault: Record<string, number>;
  violations: Violation[];
  leftBehind: Violation[];
}

const rank = (sorted: readonly number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;

/** The rollout a handover belongs to: the one whose window holds its acquisition (windows do not overlap). */
function rolloutOf(rollouts: readonly SoakRollout[], t: number): SoakRollout | undefined {
  return rollouts.find((r) => t >= r.startedAt && t <= r.endedAt + 1_000);
}

export function soakSummary(
  rollouts: readonly SoakRollout[],
  handovers: readonly (Handover & { freedBy: FreedBy })[],
  violations: readonly Violation[],
): SoakSummary {
  const byFault: Record<string, number> = {};
  const durations = new Map<string, number[]>();
  for (const r of rollouts) {
    byFault[r.fault] = (byFault[r.fault] ?? 0) + 1;
    durations.set(r.fault, [...(durations.get(r.fault) ?? []), (r.endedAt - r.startedAt) / 1000]);
  }
  const secondsByFault: SoakSummary['secondsByFault'] = {};
  for (const [fault, ds] of durations) {
    const sorted = ds.sort((a, b) => a - b);
    secondsByFault[fault] = { p50: Math.round(rank(sorted, 50) * 10) / 10, max: Math.round((sorted[sorted.length - 1] ?? 0) * 10) / 10 };
  }
  const gaps = handovers
    .map((h) => h.gapMs)
    .filter((g): g is number => g !== undefined)
    .sort((a, b) => a - b);
  const freedBy: Record<FreedBy, number> = { operator: 0, holder: 0, expiry: 0 };
  const expiryByFault: Record<string, number> = {};
  for (const h of handovers) {
    freedBy[h.freedBy]++;
    if (h.freedBy === 'expiry') {
      const fault = rolloutOf(rollouts, h.acquiredAt)?.fault ?? 'outside any rollout';
      expiryByFault[fault] = (expiryByFault[fault] ?? 0) + 1;
    }
  }
  const first = rollouts[0]?.startedAt ?? 0;
  const last = rollouts[rollouts.length - 1]?.endedAt ?? first;
  return {
    rollouts: rollouts.length,
    seconds: Math.round((last - first) / 1000),
    byFault,
    secondsByFault,
    handovers: handovers.length,
    ...(gaps.length ? { gapMs: { p50: rank(gaps, 50), p99: rank(gaps, 99), max: gaps[gaps.length - 1] ?? 0 } } : {}),
    freedBy,
    expiryByFault,
    violations: violations.filter((v) => v.invariant !== 'left-behind'),
    leftBehind: violations.filter((v) => v.invariant === 'left-behind'),
  };
}

/** The summary as a few lines of text. */
export function formatSoak(s: SoakSummary): string {
  const kv = (o: Record<string, number>) =>
    Object.entries(o)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k} ${v}`)
      .join(', ') || 'none';
  return [
    `rollouts: ${s.rollouts} in ${s.seconds} s (by fault: ${kv(s.byFault)})`,
    `rollout duration by fault, p50/max s: ${Object.entries(s.secondsByFault)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([f, d]) => `${f} ${d.p50}/${d.max}`)
      .join(', ')}`,
    `handovers: ${s.handovers}; gap from the old leader's SIGTERM p50/p99/max: ${s.gapMs ? `${s.gapMs.p50} / ${s.gapMs.p99} / ${s.gapMs.max} ms` : 'n/a'}`,
    `freed by: ${kv(s.freedBy)}; fell back to expiry, by fault: ${kv(s.expiryByFault)}`,
    `invariant violations: ${s.violations.length}${s.violations.map((v) => `\n  ${new Date(v.at).toISOString()} ${v.invariant} ${v.subject}: ${v.message}`).join('')}`,
    `left behind: ${s.leftBehind.length ? s.leftBehind.map((v) => `${v.subject}: ${v.message}`).join('; ') : 'nothing'}`,
  ].join('\n');
}
