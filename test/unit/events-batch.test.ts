import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Batcher } from '../../src/kube/events.js';

describe('Batcher', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('hands over what a key gathered within the window from its first item, once, and keys apart', () => {
    const out: [string, number[]][] = [];
    const b = new Batcher<number>(1000, (k, items) => out.push([k, items]));
    b.add('a', 1);
    vi.advanceTimersByTime(600);
    b.add('a', 2);
    b.add('b', 3);
    vi.advanceTimersByTime(400);
    expect(out).toEqual([['a', [1, 2]]]);
    b.add('a', 4); // after the window: a new batch
    vi.advanceTimersByTime(1000);
    expect(out).toEqual([['a', [1, 2]], ['b', [3]], ['a', [4]]]);
  });

  it('flush hands over everything pending at once and nothing twice', () => {
    const out: [string, number[]][] = [];
    const b = new Batcher<number>(1000, (k, items) => out.push([k, items]));
    b.add('a', 1);
    b.add('b', 2);
    b.flush();
    vi.advanceTimersByTime(5000);
    expect(out).toEqual([['a', [1]], ['b', [2]]]);
  });
});
