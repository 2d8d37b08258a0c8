// Measures each lease handover from what the operator observes. A handover is a new leadership term, not only
// a new holder name: another identity took the lease, the lease was released and taken again (by any identity),
// or the same identity now renews from another pod (a new hostNetwork pod on the old one's node). For each:
// who held it, when that holder's pod was told to stop (first sight of its deletion), when the lease was
// released and by whom, when the new term began. Pure state transitions; times are passed in.
export type ReleasedBy = 'holder' | 'operator' | 'expiry';

/** A Lease, by namespace and name: a name alone collides across drivers. */
export interface LeaseKey {
  namespace: string;
  name: string;
}
export const leaseKeyString = (k: LeaseKey): string => `${k.namespace}/${k.name}`;

export interface HandoverRecord {
  namespace: string;
  lease: string;
  oldHolder: string;
  newHolder: string;
  /** uids of the pods of the old and the new term, where known */
  oldPod?: string;
  newPod?: string;
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

/** One observation of a Lease: its holder, the pod uid renewing it when we can tell, and whether we released it. */
export interface LeaseObservation {
  holder: string;
  holderPod?: string;
  /** the pod the current term's holder identity names, when the term's own pod was not known */
  termPod?: string;
  acquireTime?: string;
  /** an empty holder carrying our release mark (api/names RELEASED_BY_OPERATOR) for this very record */
  releasedByOperator?: boolean;
}

interface Term {
  holder: string;
  /** uid of the pod whose process holds the term, once known */
  pod?: string;
  /** the lease was seen without a holder since this term began: whoever takes it next starts a new term */
  vacant?: boolean;
  releasedAt?: number;
  releasedBy?: Exclude<ReleasedBy, 'expiry'>;
}

export class HandoverTracker {
  private readonly terms = new Map<string, Term>();
  /** pod uid → when its deletion was first seen, and the API's view of the request time; in sighting order */
  private readonly stops = new Map<string, { at: number; requestedAt?: number }>();

  /** A pod was seen with a deletionTimestamp: remember the first sighting. */
  podStopping(uid: string, at: number, requestedAt?: number): void {
    if (!this.stops.has(uid)) this.stops.set(uid, { at, requestedAt });
  }

  /** When the pod's deletion was first seen, if it was. */
  stopSeenAt(uid: string): number | undefined {
    return this.stops.get(uid)?.at;
  }

  /** A version of the lease was observed. Returns the completed handover when a new leadership term began. */
  observe(lease: LeaseKey, o: LeaseObservation, at: number): HandoverRecord | undefined {
    const key = leaseKeyString(lease);
    const t = this.terms.get(key);
    if (!t) {
      if (o.holder !== '') this.terms.set(key, { holder: o.holder, pod: o.holderPod });
      return undefined;
    }
    t.pod ??= o.termPod;
    if (o.holder === '') {
      // An empty holder without our mark is the holder's own release (the upstream ReleaseLeaderElectionOnExit gate).
      if (t.releasedAt === undefined) {
        t.releasedAt = at;
        t.releasedBy = o.releasedByOperator ? 'operator' : 'holder';
      }
      t.vacant = true;
      return undefined;
    }
    const otherPod = o.holderPod !== undefined && t.pod !== undefined && o.holderPod !== t.pod;
    if (o.holder === t.holder && !t.vacant && !otherPod) {
      t.pod ??= o.holderPod; // a renewal
      return undefined;
    }
    const stop = t.pod === undefined ? undefined : this.stops.get(t.pod);
    const record: HandoverRecord = {
      namespace: lease.namespace,
      lease: lease.name,
      oldHolder: t.holder,
      newHolder: o.holder,
      oldPod: t.pod,
      newPod: o.holderPod,
      stopAt: stop?.at,
      deletionRequestedAt: stop?.requestedAt,
      releasedAt: t.releasedAt,
      releasedBy: t.releasedBy ?? 'expiry',
      acquiredAt: at,
      acquireTime: o.acquireTime,
      gapMs: stop ? Math.max(0, at - stop.at) : undefined,
    };
    this.terms.set(key, { holder: o.holder, pod: o.holderPod });
    return record;
  }

  /** The current term of a lease: its holder and, once known, the uid of the pod holding it. */
  term(lease: LeaseKey): { holder: string; pod?: string } | undefined {
    const t = this.terms.get(leaseKeyString(lease));
    return t && { holder: t.holder, pod: t.pod };
  }

  /** The lease is gone: forget its term. */
  forget(lease: LeaseKey): void {
    this.terms.delete(leaseKeyString(lease));
  }

  /** Forget stop sightings older than `cutoff` of pods no term is held by (bounded memory). */
  prune(cutoff: number): void {
    const holding = new Set([...this.terms.values()].map((t) => t.pod));
    for (const [uid, stop] of this.stops) {
      if (stop.at >= cutoff) break;
      if (!holding.has(uid)) this.stops.delete(uid);
    }
  }
}

/** "0.4s", "12.3s", "2m17s": how a gap reads in a condition, an Event and the printer column. */
export function formatGap(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}
