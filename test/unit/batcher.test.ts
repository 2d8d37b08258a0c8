import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Batcher } from '../../src/kube/batcher.js';

describe('Batcher', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());
  const make = () => {
    const out: [string, number[]][] = [];
    const b = new Batcher<number>(
      { quietMs: 500, maxMs: 2000 },
      (k, items) => out.push([k, items]),
      () => Date.now(),
    );
    return { out, b };
  };

  it('hands over what a key gathered once none came for the quiet time, keys apart', () => {
    const { out, b } = make();
    b.add('a', 1);
    vi.advanceTimersByTime(400);
    b.add('a', 2);
    b.add('b', 3);
    vi.advanceTimersByTime(400);
    expect(out).toEqual([]);
    vi.advanceTimersByTime(100);
    expect(out).toEqual([
      ['a', [1, 2]],
      ['b', [3]],
    ]);
    b.add('a', 4); // after delivery: a new batch
    vi.advanceTimersByTime(500);
    expect(out).toEqual([
      ['a', [1, 2]],
      ['b', [3]],
      ['a', [4]],
    ]);
  });

  it('does not wait past the longest time from the first item, however steadily they come', () => {
    const { out, b } = make();
    for (let t = 0; t < 3000; t += 300) {
      b.add('a', t);
      vi.advanceTimersByTime(300);
    }
    expect(out[0]?.[1]).toEqual([0, 300, 600, 900, 1200, 1500, 1800]);
    expect(out[0]?.[1].length).toBeGreaterThan(1);
  });

  it('flush hands over everything pending at once and nothing twice', () => {
    const { out, b } = make();
    b.add('a', 1);
    b.add('b', 2);
    b.flush();
    vi.advanceTimersByTime(5000);
    expect(out).toEqual([
      ['a', [1]],
      ['b', [2]],
    ]);
  });
});
