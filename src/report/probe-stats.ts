// Pure analysis of storage operations (probes) submitted during a rollout: how long each kind waited, and the
// longest stretch in which operations of a kind were pending but none completed — the user-visible cost of a
// leaderless sidecar, which a single op's wait can understate when ops keep arriving during the gap.
export type ProbeKind = 'provision' | 'attach' | 'resize' | 'snapshot';

export const PROBE_KINDS: readonly ProbeKind[] = ['provision', 'attach', 'resize', 'snapshot'];

export interface ProbeOp {
  kind: ProbeKind;
  name: string;
  /** ms since epoch */
  submittedAt: number;
  /** ms since epoch; undefined when the op never completed */
  doneAt?: number;
}

export interface ProbeKindStats {
  kind: ProbeKind;
  submitted: number;
  completed: number;
  unfinished: number;
  /** unfinished ops wait until the window's end */
  longestWaitMs: number;
  /** nearest-rank, like gapStats */
  p99WaitMs: number;
  /** longest interval with at least one op pending and none completing; 0 when there was none */
  stallMs: number;
  stallFrom?: number;
  stallTo?: number;
}

/** One entry per kind that has ops, in PROBE_KINDS order. */
export function probeStats(ops: readonly ProbeOp[], windowEnd: number): ProbeKindStats[] {
  const out: ProbeKindStats[] = [];
  for (const kind of PROBE_KINDS) {
    const mine = ops.filter((o) => o.kind === kind);
    if (mine.length === 0) continue;
    const waits = mine.map((o) => waitMs(o, windowEnd)).sort((a, b) => a - b);
    const unfinished = mine.filter((o) => o.doneAt === undefined).length;
    out.push({
      kind,
      submitted: mine.length,
      completed: mine.length - unfinished,
      unfinished,
      longestWaitMs: waits[waits.length - 1] ?? 0,
      p99WaitMs: nearestRank(waits, 99),
      ...longestStall(mine, windowEnd),
    });
  }
  return out;
}

/** Clamped at 0: a done time before the submit (clock skew) or a submit after the window is no wait. */
export function waitMs(op: ProbeOp, windowEnd: number): number {
  return Math.max(0, (op.doneAt ?? windowEnd) - op.submittedAt);
}

function nearestRank(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

interface SweepEvent {
  t: number;
  completion: boolean;
  /** change in pending ops: +1 submit, −1 completion, 0 for an op done the instant it was submitted */
  pendingDelta: number;
}

type Stall = Pick<ProbeKindStats, 'stallMs' | 'stallFrom' | 'stallTo'>;

function longestStall(ops: readonly ProbeOp[], windowEnd: number): Stall {
  const events: SweepEvent[] = [];
  for (const o of ops) {
    if (o.doneAt !== undefined && o.doneAt <= o.submittedAt) {
      // Never pending, but still a completion that ends whatever stall is open at that moment.
      events.push({ t: o.submittedAt, completion: true, pendingDelta: 0 });
      continue;
    }
    events.push({ t: o.submittedAt, completion: false, pendingDelta: 1 });
    if (o.doneAt !== undefined) events.push({ t: o.doneAt, completion: true, pendingDelta: -1 });
  }
  // Completions at t before submits at t: an op submitted as another completes starts a fresh interval.
  events.sort((a, b) => a.t - b.t || Number(b.completion) - Number(a.completion));

  let best: Stall = { stallMs: 0 };
  const consider = (from: number, to: number) => {
    if (to - from > best.stallMs) best = { stallMs: to - from, stallFrom: from, stallTo: to };
  };
  let pending = 0;
  let start: number | undefined; // defined exactly while pending > 0
  for (const e of events) {
    if (e.completion) {
      pending += e.pendingDelta;
      if (start !== undefined) consider(start, e.t);
      start = pending > 0 ? e.t : undefined;
    } else {
      if (pending === 0) start = e.t;
      pending += 1;
    }
  }
  if (start !== undefined) consider(start, Math.max(start, windowEnd));
  return best;
}
