import { describe, expect, it } from 'vitest';
import { MAX_DELAY_MS, type ReconcileResult, type Timers, WorkQueue, type WorkQueueOptions } from '../../src/kube/workqueue.js';

// A manual clock: timers fire only on advance(), in due order, with pending promises flushed after each.
class FakeClock implements Timers {
  private t = 0;
  private nextId = 0;
  readonly timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.nextId;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    if (typeof handle === 'number') this.timers.delete(handle);
  }
  async advance(ms: number): Promise<void> {
    const target = this.t + ms;
    for (;;) {
      await flush(); // let settled reconciles schedule their timers before looking for due ones
      let due: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= target && (!due || entry[1].at < due[1].at)) due = entry;
      if (!due) break;
      this.timers.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
    }
    this.t = target;
  }
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

interface Call {
  key: string;
  signal: AbortSignal;
  settled: boolean;
  resolve: (r: ReconcileResult) => void;
  reject: (err: unknown) => void;
}

// A reconcile whose calls stay running until the test settles them, to control overlap exactly.
function harness(opts: Partial<WorkQueueOptions> = {}) {
  const clock = new FakeClock();
  const calls: Call[] = [];
  const running = new Set<string>();
  let maxParallel = 0;
  const errors: { key: string; retryInMs: number }[] = [];
  const done: { key: string; outcome: string }[] = [];
  const q = new WorkQueue({
    name: 'test',
    timers: clock,
    onError: (key, _err, retryInMs) => errors.push({ key, retryInMs }),
    onDone: (key, _d, outcome) => done.push({ key, outcome }),
    reconcile: (key, signal) => {
      if (running.has(key)) throw new Error(`${key} reconciled concurrently`);
      running.add(key);
      maxParallel = Math.max(maxParallel, running.size);
      return new Promise<ReconcileResult>((resolve, reject) => {
        const call: Call = {
          key,
          signal,
          settled: false,
          resolve: (r) => settle(() => resolve(r)),
          reject: (e) => settle(() => reject(e)),
        };
        const settle = (fn: () => void) => {
          call.settled = true;
          running.delete(key);
          fn();
        };
        calls.push(call);
      });
    },
    ...opts,
  });
  const pending = (key: string): Call => {
    const c = calls.find((x) => x.key === key && !x.settled);
    if (!c) throw new Error(`no running call for ${key}`);
    return c;
  };
  return { q, clock, calls, errors, done, pending, keys: () => calls.map((c) => c.key), maxParallel: () => maxParallel };
}

describe('WorkQueue', () => {
  it('dedupes queued keys and runs them FIFO by first add', async () => {
    const h = harness({ concurrency: 1 });
    for (const k of ['a', 'b', 'a', 'c', 'b', 'a']) h.q.add(k);
    expect(h.q.len()).toBe(3);
    h.q.start();
    for (const k of ['a', 'b', 'c']) {
      await flush();
      h.pending(k).resolve();
    }
    await h.q.drain();
    expect(h.keys()).toEqual(['a', 'b', 'c']);
    expect(h.q.isIdle()).toBe(true);
  });

  it('reconciles a key added while running exactly once more, after the running one', async () => {
    const h = harness();
    h.q.start();
    h.q.add('a');
    await flush();
    for (let i = 0; i < 5; i++) h.q.add('a');
    expect(h.q.len()).toBe(0); // marked dirty, not queued next to the running one
    await flush();
    expect(h.keys()).toEqual(['a']);
    h.pending('a').resolve();
    await flush();
    expect(h.keys()).toEqual(['a', 'a']);
    h.pending('a').resolve();
    await h.q.drain();
    expect(h.keys()).toEqual(['a', 'a']);
  });

  it('runs up to `concurrency` different keys in parallel', async () => {
    const h = harness({ concurrency: 3 });
    for (const k of ['a', 'b', 'c', 'd', 'e']) h.q.add(k);
    h.q.start();
    await flush();
    expect(h.keys()).toEqual(['a', 'b', 'c']);
    expect(h.q.len()).toBe(2);
    h.pending('b').resolve();
    await flush();
    expect(h.keys()).toEqual(['a', 'b', 'c', 'd']);
    for (const k of ['a', 'c', 'd']) h.pending(k).resolve();
    await flush();
    h.pending('e').resolve();
    await h.q.drain();
    expect(h.maxParallel()).toBe(3);
  });

  it('defaults to a concurrency of 2 and does nothing before start()', async () => {
    const h = harness();
    for (const k of ['a', 'b', 'c']) h.q.add(k);
    await flush();
    expect(h.keys()).toEqual([]);
    h.q.start();
    await flush();
    expect(h.keys()).toEqual(['a', 'b']);
  });

  it('retries a failing key with capped exponential backoff and resets it on success', async () => {
    const h = harness({ backoff: { baseMs: 100, maxMs: 350 } });
    h.q.start();
    h.q.add('a');
    const failAndWait = async (ms: number) => {
      await flush();
      h.pending('a').reject(new Error('boom'));
      await flush();
      const before = h.calls.length;
      await h.clock.advance(ms - 1);
      expect(h.calls.length).toBe(before); // not retried early
      await h.clock.advance(1);
      expect(h.calls.length).toBe(before + 1);
    };
    await failAndWait(100);
    await failAndWait(200);
    await failAndWait(350); // 400 capped at max
    await failAndWait(350);
    expect(h.errors.map((e) => e.retryInMs)).toEqual([100, 200, 350, 350]);
    h.pending('a').resolve();
    await flush();
    h.q.add('a');
    await failAndWait(100); // success reset the failure count
    expect(h.done.map((d) => d.outcome)).toEqual(['error', 'error', 'error', 'error', 'success', 'error']);
  });

  it('keeps failure counts per key', async () => {
    const h = harness({ backoff: { baseMs: 10, maxMs: 1000 } });
    h.q.start();
    h.q.add('a');
    await flush();
    h.pending('a').reject(new Error('1'));
    await h.clock.advance(10);
    h.pending('a').reject(new Error('2'));
    h.q.add('b');
    await flush();
    h.pending('b').reject(new Error('3'));
    await flush();
    expect(h.errors).toEqual([
      { key: 'a', retryInMs: 10 },
      { key: 'a', retryInMs: 20 },
      { key: 'b', retryInMs: 10 },
    ]);
  });

  it('treats a synchronous throw from reconcile as a failure', async () => {
    const clock = new FakeClock();
    const errors: number[] = [];
    let n = 0;
    const q = new WorkQueue({
      name: 'sync',
      timers: clock,
      backoff: { baseMs: 50, maxMs: 50 },
      onError: (_k, _e, ms) => errors.push(ms),
      reconcile: () => {
        n++;
        throw new Error('sync');
      },
    });
    q.start();
    q.add('a');
    await flush();
    expect(errors).toEqual([50]);
    await clock.advance(50);
    expect(n).toBe(2);
  });

  it('requeues after requeueAfterMs, resets failures, and stops on void', async () => {
    const h = harness({ backoff: { baseMs: 100, maxMs: 10_000 } });
    h.q.start();
    h.q.add('a');
    await flush();
    h.pending('a').reject(new Error('boom')); // failure #1
    await h.clock.advance(100);
    h.pending('a').resolve({ requeueAfterMs: 500 });
    await h.clock.advance(499);
    expect(h.calls.length).toBe(2);
    expect(h.q.isIdle()).toBe(true); // delayed keys do not count as queued
    await h.clock.advance(1);
    expect(h.calls.length).toBe(3);
    h.pending('a').reject(new Error('boom'));
    await flush();
    expect(h.errors.map((e) => e.retryInMs)).toEqual([100, 100]); // requeue reset the count
    await h.clock.advance(100);
    h.pending('a').resolve();
    await h.clock.advance(100_000);
    expect(h.calls.length).toBe(4);
    expect(h.done.map((d) => d.outcome)).toEqual(['error', 'requeue', 'error', 'success']);
  });

  it('addAfter fires after the delay and keeps the soonest of several', async () => {
    const h = harness();
    h.q.start();
    h.q.addAfter('a', 300);
    h.q.addAfter('a', 100);
    h.q.addAfter('a', 200);
    expect(h.clock.timers.size).toBe(1);
    await h.clock.advance(99);
    expect(h.calls.length).toBe(0);
    await h.clock.advance(1);
    expect(h.keys()).toEqual(['a']);
    h.pending('a').resolve();
    await h.clock.advance(1000);
    expect(h.keys()).toEqual(['a']);
  });

  it('a delay longer than a Node timer can take waits the longest one instead of firing at once', async () => {
    const h = harness();
    h.q.start();
    h.q.addAfter('a', 60 * 24 * 3_600_000); // 60 days: a certificate's next rotation
    expect([...h.clock.timers.values()][0]?.at).toBe(MAX_DELAY_MS);
    await h.clock.advance(MAX_DELAY_MS - 1);
    expect(h.calls.length).toBe(0);
    await h.clock.advance(1);
    expect(h.keys()).toEqual(['a']);
  });

  it('add() during a pending addAfter runs now and the delayed add still fires later', async () => {
    const h = harness();
    h.q.start();
    h.q.addAfter('a', 100);
    h.q.add('a');
    await flush();
    expect(h.keys()).toEqual(['a']);
    h.pending('a').resolve();
    await h.clock.advance(100);
    expect(h.keys()).toEqual(['a', 'a']);
  });

  it('shutDown aborts running reconciles, waits for them, drops queued and delayed keys, and ignores adds', async () => {
    const h = harness({ concurrency: 1 });
    h.q.add('a');
    h.q.add('b');
    h.q.addAfter('c', 100);
    h.q.start();
    await flush();
    const a = h.pending('a');
    expect(a.signal.aborted).toBe(false);
    let stopped = false;
    const stopping = h.q.shutDown().then(() => (stopped = true));
    expect(a.signal.aborted).toBe(true);
    expect(h.q.len()).toBe(0);
    expect(h.clock.timers.size).toBe(0);
    await flush();
    expect(stopped).toBe(false); // still waiting for 'a'
    a.reject(a.signal.reason);
    await stopping;
    h.q.add('d');
    h.q.addAfter('e', 1);
    expect(h.clock.timers.size).toBe(0); // no timer is even armed after shutdown
    await h.clock.advance(1000);
    expect(h.keys()).toEqual(['a']);
    expect(h.q.len()).toBe(0);
    expect(h.errors).toEqual([]); // no retry is scheduled or reported after shutdown
  });

  it('starts again after a finished shutDown, empty and with fresh backoff and signal; not before it finished', async () => {
    const h = harness({ concurrency: 1, backoff: { baseMs: 100, maxMs: 1000 } });
    h.q.add('a');
    h.q.start();
    await flush();
    h.pending('a').reject(new Error('boom'));
    await flush();
    await h.clock.advance(100);
    h.pending('a').reject(new Error('boom'));
    await flush();
    expect(h.errors.map((e) => e.retryInMs)).toEqual([100, 200]);
    await h.clock.advance(200);
    const first = h.pending('a');
    h.q.add('b');
    const stopping = h.q.shutDown();
    expect(() => h.q.start()).toThrow(/before its shutdown finished/);
    first.reject(first.signal.reason);
    await stopping;
    h.q.start();
    await flush();
    expect(h.q.len()).toBe(0); // 'b', queued before the shutdown, is not run by the new start
    expect(h.keys()).toEqual(['a', 'a', 'a']);
    h.q.add('a');
    await flush();
    const again = h.pending('a');
    expect(again.signal.aborted).toBe(false);
    again.reject(new Error('boom'));
    await flush();
    expect(h.errors.at(-1)?.retryInMs).toBe(100); // the failure count began again
  });

  it('shutDown resolves immediately when nothing is running, and drain() resolves after it', async () => {
    const h = harness();
    h.q.add('a');
    const drained = h.q.drain();
    await h.q.shutDown();
    await drained;
    expect(h.q.isIdle()).toBe(true);
    expect(h.keys()).toEqual([]);
  });

  it('survives throwing onError/onDone callbacks', async () => {
    const clock = new FakeClock();
    const seen: string[] = [];
    const q = new WorkQueue({
      name: 'cb',
      timers: clock,
      backoff: { baseMs: 10, maxMs: 10 },
      onError: () => {
        throw new Error('onError broke');
      },
      onDone: (key) => {
        seen.push(key);
        throw new Error('onDone broke');
      },
      reconcile: async (key) => {
        if (key === 'a' && !seen.includes('a')) throw new Error('first a fails');
      },
    });
    q.start();
    q.add('a');
    q.add('b');
    await flush();
    await clock.advance(10); // the retry still happens despite onError throwing
    q.add('c');
    await q.drain();
    expect(seen).toEqual(['a', 'b', 'a', 'c']);
  });

  it('swallows a rejection from an async onDone instead of leaving it unhandled', async () => {
    const unhandled: unknown[] = [];
    const record = (e: unknown) => unhandled.push(e);
    process.on('unhandledRejection', record);
    try {
      const q = new WorkQueue({
        name: 'async-cb',
        timers: new FakeClock(),
        onDone: async () => {
          throw new Error('async onDone broke');
        },
        reconcile: async () => undefined,
      });
      q.start();
      q.add('a');
      q.add('b');
      await q.drain();
      await flush();
      await flush();
      expect(unhandled).toEqual([]);
      expect(q.isIdle()).toBe(true);
    } finally {
      process.off('unhandledRejection', record);
    }
  });

  it('typed keys: two keys with the same id are one key; the depth is told as it changes', async () => {
    type Key = { kind: string; name: string };
    const seen: Key[] = [];
    const depths: number[] = [];
    const q = new WorkQueue<Key>({
      name: 'typed',
      timers: new FakeClock(),
      concurrency: 1,
      id: (k) => `${k.kind}/${k.name}`,
      onDepth: (d) => depths.push(d),
      reconcile: async (k) => void seen.push(k),
    });
    q.add({ kind: 'lease', name: 'a' });
    q.add({ kind: 'lease', name: 'a' });
    q.add({ kind: 'workload', name: 'a' });
    expect(q.len()).toBe(2);
    q.start();
    await q.drain();
    expect(seen).toEqual([
      { kind: 'lease', name: 'a' },
      { kind: 'workload', name: 'a' },
    ]);
    expect(depths).toEqual([1, 2, 1, 0]);
  });
});
