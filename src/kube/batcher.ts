// Coalescing: many changes that arrive together become one write.
import { type Clock, systemClock } from '../clock.js';

/**
 * Gathers items per key while they keep coming — until `quietMs` pass without one, or `maxMs` since the first —
 * then hands them over together: one write for what happened at once (a pod replacement moves a Deployment's
 * status several times and hands over several leases within a second) instead of one per item. `flush` hands
 * over everything pending now (on shutdown).
 */
export class Batcher<T> {
  private readonly pending = new Map<string, { items: T[]; firstAt: number; timer: NodeJS.Timeout }>();

  constructor(
    private readonly window: { quietMs: number; maxMs: number },
    private readonly deliver: (key: string, items: T[]) => void,
    private readonly now: Clock = systemClock,
  ) {}

  add(key: string, item: T): void {
    const now = this.now();
    const p = this.pending.get(key);
    if (p) clearTimeout(p.timer);
    const firstAt = p?.firstAt ?? now;
    const items = p ? [...p.items, item] : [item];
    const due = Math.min(now + this.window.quietMs, firstAt + this.window.maxMs);
    this.pending.set(key, { items, firstAt, timer: setTimeout(() => this.deliverKey(key), Math.max(0, due - now)) });
  }

  flush(): void {
    for (const key of [...this.pending.keys()]) this.deliverKey(key);
  }

  private deliverKey(key: string): void {
    const p = this.pending.get(key);
    if (!p) return;
    clearTimeout(p.timer);
    this.pending.delete(key);
    this.deliver(key, p.items);
  }
}
