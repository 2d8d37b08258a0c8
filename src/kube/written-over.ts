// The versions of objects our own writes replaced, while the informer cache may still hold them. A decision
// taken again on such a version (another event came first) would repeat a write that is done (a merge patch:
// a wasted request) or fail (a precondition: a 409). The watch brings the successor within milliseconds; a
// version is trusted as written over only for a few seconds, in case it lags or a write went unseen.
import type { Clock } from '../clock.js';

export class WrittenOver {
  private readonly written = new Map<string, { rv: string; what: string; at: number }>();

  constructor(
    private readonly trustMs: number,
    private readonly now: Clock,
  ) {}

  /** Our write `what` replaced version `rv` of the object `key` (or found it replaced). */
  note(key: string, rv: string | undefined, what: string): void {
    if (rv) this.written.set(key, { rv, what, at: this.now() });
  }

  /** Whether `what` was already written over this very version, recently: the cache is behind, not the world. */
  has(key: string, rv: string | undefined, what: string): boolean {
    const w = this.written.get(key);
    return w !== undefined && w.rv === rv && w.what === what && this.now() - w.at < this.trustMs;
  }

  /** A new version of the object arrived (or it is gone): what we wrote is in the cache now. */
  forget(key: string): void {
    this.written.delete(key);
  }
}
