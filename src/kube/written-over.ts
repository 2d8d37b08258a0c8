// The versions of objects our own writes replaced, while the informer cache may still hold them. A decision
// taken again on such a version (another event came before our write's echo) would repeat a write that is done
// (a merge patch: a wasted request) or fail (a test op: a 422; a precondition: a 409). Stale are the version a
// write replaced and every version the watch brings before the one the write produced: the watch delivers an
// object's versions in order, so until that one arrives, what the cache holds predates the write. The echo comes
// within milliseconds; a write is trusted as unseen only for a few seconds, in case it lags or is never seen.
import type { Clock } from '../clock.js';

interface Write {
  /** the version the write was decided on */
  before: string;
  /** the version it produced; undefined: it found `before` replaced by someone else (a 409) */
  after?: string;
  at: number;
}

export class WrittenOver {
  private readonly written = new Map<string, Map<string, Write>>(); // object key → what was written → the write

  constructor(
    private readonly trustMs: number,
    private readonly now: Clock,
  ) {}

  /**
   * Our write `what` replaced version `before` of the object `key` and produced `after` (or found `before`
   * replaced: no `after`). `cached`: the version the cache holds as the write returns; if it is no longer
   * `before`, the watch has brought a successor first (our write's echo can come before its response), so the
   * cache is not behind and nothing is noted.
   */
  note(key: string, before: string | undefined, what: string, after: string | undefined, cached: string | undefined): void {
    if (!before || cached !== before) return;
    let writes = this.written.get(key);
    if (!writes) this.written.set(key, (writes = new Map()));
    writes.set(what, { before, after, at: this.now() });
  }

  /** Whether `what`, decided on version `rv`, was decided on a version our same write already replaced: the cache is behind, not the world. */
  has(key: string, rv: string | undefined, what: string): boolean {
    const w = this.written.get(key)?.get(what);
    if (!w || rv === undefined || this.now() - w.at >= this.trustMs) return false;
    return rv === w.before || (w.after !== undefined && rv !== w.after);
  }

  /** Version `rv` of the object arrived: writes that produced it (or were refused on an older one) are in the cache now. */
  seen(key: string, rv: string | undefined): void {
    const writes = this.written.get(key);
    if (!writes) return;
    const now = this.now();
    for (const [what, w] of writes) {
      if (w.after === undefined ? w.before !== rv : w.after === rv) writes.delete(what);
      else if (now - w.at >= this.trustMs) writes.delete(what);
    }
    if (writes.size === 0) this.written.delete(key);
  }

  /** The object is gone. */
  gone(key: string): void {
    this.written.delete(key);
  }

  /** Objects with a write not yet seen (for tests and memory checks). */
  get size(): number {
    return this.written.size;
  }
}
