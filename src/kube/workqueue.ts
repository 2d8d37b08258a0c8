// A keyed, level-based work queue with client-go workqueue semantics: a key is queued at most once,
// never reconciled concurrently with itself, and retried with per-key exponential backoff. Keys are typed
// values (a lease, a workload); `id` names each one for the de-duplication.

import { type Clock, systemClock } from '../clock.js';

export type ReconcileResult = { requeueAfterMs?: number } | void;

/** The clock and timers a queue runs on (tests pass manual ones). */
export interface Timers {
  now: Clock;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** The longest delay a Node timer takes (about 24.8 days); a later requeue comes that much later and looks again. */
export const MAX_DELAY_MS = 2 ** 31 - 1;

export const realTimers: Timers = {
  now: systemClock,
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface WorkQueueOptions<K = string> {
  name: string;
  reconcile: (key: K, signal: AbortSignal) => Promise<ReconcileResult>;
  /** What makes two keys the same key (default: the key itself, as a string). */
  id?: (key: K) => string;
  /** Number of different keys reconciled at once; default 2. */
  concurrency?: number;
  /** Per-key exponential failure backoff; default 200ms .. 60s. */
  backoff?: { baseMs: number; maxMs: number };
  timers?: Timers;
  /** Called after a failed reconcile with the delay before the retry (not called once shut down). */
  onError?: (key: K, err: unknown, retryInMs: number) => void;
  onDone?: (key: K, durationMs: number, outcome: Outcome) => void;
  /** Called with the number of keys waiting whenever it changes. */
  onDepth?: (depth: number) => void;
}

export type Outcome = 'success' | 'error' | 'requeue';

export class WorkQueue<K = string> {
  private readonly clock: Timers;
  private readonly concurrency: number;
  private readonly backoff: { baseMs: number; maxMs: number };
  private abort = new AbortController();
  private readonly id: (key: K) => string;
  /** Every key that is queued, running or waiting for a retry, by its id. */
  private readonly keys = new Map<string, K>();
  private queue: string[] = [];
  // Keys that need a reconcile: queued ones, plus running ones that were added again meanwhile.
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly running = new Set<Promise<void>>();
  private readonly delayed = new Map<string, { at: number; handle: unknown }>();
  private readonly failures = new Map<string, number>();
  private idleWaiters: (() => void)[] = [];
  private started = false;
  private shuttingDown = false;
  private shutDownPromise: Promise<void> | undefined;

  constructor(private readonly opts: WorkQueueOptions<K>) {
    this.id = opts.id ?? String;
    this.clock = opts.timers ?? realTimers;
    this.concurrency = opts.concurrency ?? 2;
    this.backoff = opts.backoff ?? { baseMs: 200, maxMs: 60_000 };
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) {
      throw new RangeError(`workqueue ${opts.name}: concurrency must be a positive integer`);
    }
  }

  add(key: K): void {
    const id = this.id(key);
    if (this.shuttingDown || this.dirty.has(id)) return;
    this.dirty.add(id);
    this.keys.set(id, key);
    // A running key is only marked dirty; finish() queues it again so it never runs twice at once.
    if (this.processing.has(id)) return;
    this.queue.push(id);
    this.depthChanged();
    this.pump();
  }

  // Chosen semantics: a later add() does not cancel a pending addAfter; the extra reconcile is harmless
  // because reconciles are level-based.
  addAfter(key: K, requestedMs: number): void {
    if (this.shuttingDown) return;
    if (!(requestedMs > 0)) return this.add(key);
    const id = this.id(key);
    // Node fires a timer longer than 2^31-1 ms at once (TimeoutOverflowWarning): a far requeue would spin.
    const delayMs = Math.min(requestedMs, MAX_DELAY_MS);
    const at = this.clock.now() + delayMs;
    const pending = this.delayed.get(id);
    if (pending && pending.at <= at) return;
    if (pending) this.clock.clearTimeout(pending.handle);
    const handle = this.clock.setTimeout(() => {
      this.delayed.delete(id);
      this.add(key);
    }, delayMs);
    this.delayed.set(id, { at, handle });
  }

  /**
   * Starts processing. After a shutDown() that has finished (its promise resolved: nothing runs any more) the queue
   * starts again empty, with fresh backoff counts and signal, as a new one would: a leader that lost its lease and
   * wins it back. Starting while a shutdown still waits for running reconciles would let them overlap: refused.
   */
  start(): void {
    if (this.shuttingDown) {
      if (this.running.size > 0) throw new Error(`workqueue ${this.opts.name}: start() before its shutdown finished`);
      this.shuttingDown = false;
      this.shutDownPromise = undefined;
      this.abort = new AbortController();
      this.failures.clear();
    }
    this.started = true;
    this.pump();
  }

  shutDown(): Promise<void> {
    if (this.shutDownPromise) return this.shutDownPromise;
    this.shuttingDown = true;
    this.abort.abort(new Error(`workqueue ${this.opts.name} is shutting down`));
    for (const { handle } of this.delayed.values()) this.clock.clearTimeout(handle);
    this.delayed.clear();
    this.queue = [];
    this.dirty.clear();
    for (const id of [...this.keys.keys()]) if (!this.processing.has(id)) this.keys.delete(id);
    this.depthChanged();
    this.notifyIfIdle();
    this.shutDownPromise = Promise.all(this.running).then(() => undefined);
    return this.shutDownPromise;
  }

  len(): number {
    return this.queue.length;
  }

  isIdle(): boolean {
    return this.queue.length === 0 && this.processing.size === 0;
  }

  drain(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.started && !this.shuttingDown && this.processing.size < this.concurrency) {
      const id = this.queue.shift();
      if (id === undefined) return;
      this.depthChanged();
      this.dirty.delete(id);
      const key = this.keys.get(id);
      if (key === undefined) continue;
      this.processing.add(id);
      const run = this.process(id, key);
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    }
  }

  private async process(id: string, key: K): Promise<void> {
    const start = this.clock.now();
    let outcome: Outcome = 'success';
    let requeueAfterMs = 0;
    let error: unknown;
    try {
      const result = await this.opts.reconcile(key, this.abort.signal);
      if (result && typeof result.requeueAfterMs === 'number') {
        outcome = 'requeue';
        requeueAfterMs = result.requeueAfterMs;
      }
    } catch (err) {
      outcome = 'error';
      error = err;
    }
    this.finish(id, key, outcome, requeueAfterMs, error, this.clock.now() - start);
  }

  private finish(id: string, key: K, outcome: Outcome, requeueAfterMs: number, error: unknown, durationMs: number): void {
    this.processing.delete(id);
    // Re-queue a key added while it ran before scheduling retries, so add() below sees it as dirty and dedupes.
    if (this.dirty.has(id)) {
      this.queue.push(id);
      this.depthChanged();
    }
    if (!this.shuttingDown) {
      if (outcome === 'error') {
        const failures = (this.failures.get(id) ?? 0) + 1;
        this.failures.set(id, failures);
        // Exponent is capped so the product never overflows to Infinity/NaN.
        const retryInMs = Math.min(this.backoff.maxMs, this.backoff.baseMs * 2 ** Math.min(failures - 1, 30));
        this.addAfter(key, retryInMs);
        safely(() => this.opts.onError?.(key, error, retryInMs));
      } else {
        this.failures.delete(id);
        if (outcome === 'requeue') this.addAfter(key, requeueAfterMs);
      }
    }
    safely(() => this.opts.onDone?.(key, durationMs, outcome));
    // A key neither queued, running nor waiting for a retry is forgotten.
    if (!this.dirty.has(id) && !this.processing.has(id) && !this.delayed.has(id)) this.keys.delete(id);
    this.pump();
    this.notifyIfIdle();
  }

  private depthChanged(): void {
    safely(() => this.opts.onDepth?.(this.queue.length));
  }

  private notifyIfIdle(): void {
    if (!this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}

// Callbacks are for observability; a throwing (or rejecting) one must not stall or crash the queue.
function safely(fn: () => unknown): void {
  try {
    const r = fn();
    if (r instanceof Promise) r.catch(() => undefined);
  } catch {
    // Swallowed on purpose: see above.
  }
}
