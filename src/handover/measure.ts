// Measures each lease handover from what the operator observes: who held the lease, when that holder was
// told to stop (first sight of its pod's deletion), when the lease was released and by whom, and when a new
// holder acquired it. Pure state transitions; times are passed in (the operator's own observation clock).
export type ReleasedBy = 'holder' | 'operator' | 'expiry';

export interface HandoverRecord {
  lease: string; // namespace/name
  oldHolder: string;
  newHolder: string;
  /** first observation of the old holder's pod deletion (ms); undefined when it was never deleted */
  stopAt?: number;
  /** deletionTimestamp − grace period of that deletion, per the API (second resolution) */
  deletionRequestedAt?: number;
  releasedAt?: number;
  releasedBy: ReleasedBy;
  acquiredAt: number;
  /** the new holder's own acquireTime from the Lease record */
  acquireTime?: string;
  /** acquiredAt − stopAt in ms; undefined when the old holder was never told to stop */
  gapMs?: number;
}

interface LeaseState {
  holder: string;
  releasedAt?: number;
  releasedBy?: Exclude<ReleasedBy, 'expiry'>;
  /** The operator is writing a release: the empty holder it causes may be observed before the write returns. */
  operatorReleasing?: boolean;
}

export class HandoverTracker {
  private readonly leases = new Map<string, LeaseState>();
  /** holder identity → when its pod was first seen deleting, and the API's view of the request time */
  private readonly stops = new Map<string, { at: number; requestedAt?: number }>();

  /** The holder's pod was seen with a deletionTimestamp: remember the first sighting. */
  holderStopping(holder: string, at: number, requestedAt?: number): void {
    if (!this.stops.has(holder)) this.stops.set(holder, { at, requestedAt });
  }

  /** The operator is about to write the release record (call before the write). */
  operatorReleasing(lease: string): void {
    const s = this.leases.get(lease);
    if (s) s.operatorReleasing = true;
  }

  /** The operator's release write finished: `ok` false when it failed (a conflict, an error). */
  operatorReleaseDone(lease: string, ok: boolean, at: number): void {
    const s = this.leases.get(lease);
    if (!s) return;
    s.operatorReleasing = false;
    if (ok) {
      s.releasedAt ??= at;
      s.releasedBy = 'operator';
    }
  }

  /**
   * A version of the lease was observed. Returns a completed handover when the holder changed from one
   * identity to another.
   */
  observe(lease: string, holder: string, at: number, acquireTime?: string): HandoverRecord | undefined {
    const s = this.leases.get(lease);
    if (!s) {
      if (holder !== '') this.leases.set(lease, { holder });
      return undefined;
    }
    if (holder === '') {
      // An empty holder we did not write is the holder's own release (the upstream ReleaseLeaderElectionOnExit gate).
      if (s.releasedAt === undefined) {
        s.releasedAt = at;
        s.releasedBy = s.operatorReleasing ? 'operator' : 'holder';
      }
      return undefined;
    }
    if (holder === s.holder) {
      // Renewed, or re-acquired by the same identity after a release: no handover.
      if (s.releasedAt !== undefined && !s.operatorReleasing) {
        s.releasedAt = undefined;
        s.releasedBy = undefined;
      }
      return undefined;
    }
    const stop = this.stops.get(s.holder);
    const record: HandoverRecord = {
      lease,
      oldHolder: s.holder,
      newHolder: holder,
      stopAt: stop?.at,
      deletionRequestedAt: stop?.requestedAt,
      releasedAt: s.releasedAt,
      releasedBy: s.releasedBy ?? 'expiry',
      acquiredAt: at,
      acquireTime,
      gapMs: stop ? Math.max(0, at - stop.at) : undefined,
    };
    this.leases.set(lease, { holder });
    return record;
  }

  /** Forget stop sightings of holders no lease mentions any more (bounded memory). */
  prune(): void {
    const live = new Set([...this.leases.values()].map((s) => s.holder));
    for (const holder of this.stops.keys()) if (!live.has(holder)) this.stops.delete(holder);
  }
}

/** "0.4s", "12.3s", "2m17s": how a gap reads in a condition, an Event and the printer column. */
export function formatGap(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}
