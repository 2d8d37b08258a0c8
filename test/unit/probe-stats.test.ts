import { describe, expect, it } from 'vitest';
import { type ProbeKind, type ProbeKindStats, type ProbeOp, probeStats } from '../../src/report/probe-stats.js';

let seq = 0;
const op = (submittedAt: number, doneAt?: number, kind: ProbeKind = 'provision'): ProbeOp => ({ kind, name: `${kind}-${seq++}`, submittedAt, doneAt });
const only = (ops: ProbeOp[], windowEnd: number): ProbeKindStats => {
  const stats = probeStats(ops, windowEnd);
  expect(stats).toHaveLength(1);
  const [s] = stats;
  if (s === undefined) throw new Error('no stats');
  return s;
};

describe('probeStats', () => {
  it('has no entries without ops', () => expect(probeStats([], 10_000)).toEqual([]));

  it('reports one completed op in full', () => {
    expect(probeStats([op(1_000, 3_000)], 10_000)).toEqual([
      {
        kind: 'provision',
        submitted: 1,
        completed: 1,
        unfinished: 0,
        longestWaitMs: 2_000,
        p99WaitMs: 2_000,
        stallMs: 2_000,
        stallFrom: 1_000,
        stallTo: 3_000,
      },
    ]);
  });

  it.each<[string, ProbeOp[], number, Partial<ProbeKindStats>]>([
    [
      'back-to-back: the next op submitted as the previous completes starts a fresh interval',
      [op(0, 1_000), op(1_000, 3_000)],
      10_000,
      { longestWaitMs: 2_000, stallMs: 2_000, stallFrom: 1_000, stallTo: 3_000 },
    ],
    ['idle time between ops is no stall', [op(0, 1_000), op(5_000, 5_500)], 10_000, { stallMs: 1_000, stallFrom: 0, stallTo: 1_000 }],
    [
      'overlapping, completions frequent: one slow op does not make a stall while others complete',
      [op(0, 10_000), ...[1, 2, 3, 4, 5, 6, 7, 8, 9].map((i) => op(i * 1_000, i * 1_000 + 500))],
      10_000,
      { longestWaitMs: 10_000, stallMs: 1_500, stallFrom: 0, stallTo: 1_500 },
    ],
    [
      'overlapping, one long blocked period: the stall spans it',
      [op(0, 500), op(1_000, 15_000), op(2_000, 15_000), op(3_000, 15_000), op(15_500, 16_000)],
      20_000,
      { longestWaitMs: 14_000, stallMs: 14_000, stallFrom: 1_000, stallTo: 15_000 },
    ],
    [
      'completing out of order: a later op’s completion ends the interval, the earlier op’s restarts it',
      [op(0, 5_000), op(1_000, 2_000)],
      10_000,
      { longestWaitMs: 5_000, stallMs: 3_000, stallFrom: 2_000, stallTo: 5_000 },
    ],
    [
      'unfinished at the window’s end: it waits until then, and so does the stall',
      [op(0, 1_000), op(2_000)],
      10_000,
      { completed: 1, unfinished: 1, longestWaitMs: 8_000, p99WaitMs: 8_000, stallMs: 8_000, stallFrom: 2_000, stallTo: 10_000 },
    ],
    [
      'unfinished while others still complete: the stall starts at the last completion',
      [op(0), op(1_000, 3_000)],
      10_000,
      { unfinished: 1, longestWaitMs: 10_000, stallMs: 7_000, stallFrom: 3_000, stallTo: 10_000 },
    ],
    ['ties: equally long stalls report the first', [op(0, 1_000), op(2_000, 3_000)], 10_000, { stallMs: 1_000, stallFrom: 0, stallTo: 1_000 }],
    ['ties: simultaneous completions end one interval', [op(0, 3_000), op(1_000, 3_000)], 10_000, { stallMs: 3_000, stallFrom: 0, stallTo: 3_000 }],
    [
      'ties: an op done the instant it was submitted still ends the open stall',
      [op(0, 10_000), op(4_000, 4_000)],
      10_000,
      { completed: 2, longestWaitMs: 10_000, stallMs: 6_000, stallFrom: 4_000, stallTo: 10_000 },
    ],
  ])('%s', (_case, ops, windowEnd, want) => {
    expect(only(ops, windowEnd)).toMatchObject(want);
  });

  it('reports no stall when nothing was ever pending', () => {
    expect(probeStats([op(4_000, 4_000, 'resize')], 10_000)).toEqual([
      { kind: 'resize', submitted: 1, completed: 1, unfinished: 0, longestWaitMs: 0, p99WaitMs: 0, stallMs: 0 },
    ]);
  });

  it('uses nearest-rank p99 over every wait, unfinished ones included', () => {
    const hundred = Array.from({ length: 100 }, (_, i) => op(0, i + 1));
    expect(only(hundred, 1_000)).toMatchObject({ p99WaitMs: 99, longestWaitMs: 100 });
    const ten = [...Array.from({ length: 9 }, (_, i) => op(0, i + 1)), op(0)];
    expect(only(ten, 1_000)).toMatchObject({ p99WaitMs: 1_000, unfinished: 1 });
  });

  it('keeps kinds apart, in provision, attach, resize, snapshot order', () => {
    const stats = probeStats([op(0, 9_000, 'snapshot'), op(0, 1_000, 'provision'), op(500, 2_500, 'attach'), op(100, 200, 'provision')], 10_000);
    expect(stats.map((s) => [s.kind, s.submitted, s.stallMs])).toEqual([
      ['provision', 2, 800],
      ['attach', 1, 2_000],
      ['snapshot', 1, 9_000],
    ]);
  });
});
