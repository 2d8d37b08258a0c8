// Pure analysis of lease handovers from what a watcher observed: holder changes per lease (observation
// times on this machine's clock) and the time each old holder was told to stop (its SIGTERM).
export interface LeaseObservation {
  /** ms since epoch, when the watcher saw this record */
  t: number;
  lease: string;
  holder: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
}

export interface Handover {
  lease: string;
  oldHolder: string;
  newHolder: string;
  /** when the old holder was told to stop (SIGTERM), if known */
  stopAt?: number;
  /** when an empty holder was observed between the two, if any (a release) */
  releasedAt?: number;
  acquiredAt: number;
  /** acquiredAt − stopAt, in ms; undefined when the stop time is unknown */
  gapMs?: number;
}

/**
 * Every change of holder from one non-empty identity to another, per lease, in time order. A release (empty
 * holder) in between is kept as `releasedAt`; re-acquisition by the same holder after a release is not a
 * handover.
 */
export function handoversFrom(observations: readonly LeaseObservation[], stopTimes: ReadonlyMap<string, number>): Handover[] {
  const byLease = new Map<string, LeaseObservation[]>();
  for (const o of [...observations].sort((a, b) => a.t - b.t)) {
    const list = byLease.get(o.lease) ?? [];
    list.push(o);
    byLease.set(o.lease, list);
  }
  const out: Handover[] = [];
  for (const [lease, list] of byLease) {
    let holder = ''; // the last non-empty holder
    let releasedAt: number | undefined;
    for (const o of list) {
      if (o.holder === '') {
        releasedAt ??= o.t;
      } else if (o.holder === holder) {
        releasedAt = undefined; // renewed, or re-acquired by the same holder after a release
      } else {
        if (holder !== '') {
          const stopAt = stopTimes.get(holder);
          out.push({
            lease,
            oldHolder: holder,
            newHolder: o.holder,
            stopAt,
            releasedAt,
            acquiredAt: o.t,
            gapMs: stopAt === undefined ? undefined : o.t - stopAt,
          });
        }
        holder = o.holder;
        releasedAt = undefined;
      }
    }
  }
  return out.sort((a, b) => a.acquiredAt - b.acquiredAt);
}

export interface GapStats {
  count: number;
  p50: number;
  p95: number;
  max: number;
}

/** Nearest-rank percentiles of gaps in ms. */
export function gapStats(gapsMs: readonly number[]): GapStats | undefined {
  if (gapsMs.length === 0) return undefined;
  const s = [...gapsMs].sort((a, b) => a - b);
  const rank = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? 0;
  return { count: s.length, p50: rank(50), p95: rank(95), max: s[s.length - 1] ?? 0 };
}

export interface HolderSegment {
  holder: string;
  from: number;
  to: number;
}

/**
 * Who held the lease when, between `from` and `to`, from what a watcher observed: one segment per holder in
 * turn; an empty holder (a release) is no segment. The first record seen (the watch's initial list) was
 * already in force before the window, so it starts at `from`.
 */
export function holderSegments(observations: readonly LeaseObservation[], lease: string, from: number, to: number): HolderSegment[] {
  const seen = observations.filter((o) => o.lease === lease).sort((a, b) => a.t - b.t);
  const segments: HolderSegment[] = [];
  let holder = '';
  let since = from;
  for (const [i, o] of seen.entries()) {
    if (o.holder === holder) continue;
    const at = i === 0 ? from : Math.min(to, Math.max(from, o.t));
    if (holder) segments.push({ holder, from: since, to: at });
    holder = o.holder;
    since = at;
  }
  if (holder && since < to) segments.push({ holder, from: since, to });
  return segments;
}

/** One handover as this bench sees it. Times in ms since epoch; durations in ms. */
export interface RaceHandover {
  mode: string;
  rollout: number;
  lease: string;
  oldHolder: string;
  newHolder: string;
  /** the acquirer is a pod of this rollout (not an old replica that was standing by) */
  newPod: boolean;
  /** when the kubelet stopped the old holder (SIGTERM), and when a Pod watch first saw its containers all terminated */
  stopAt?: number;
  oldTerminalAt?: number;
  releasedAt?: number;
  firstAttemptAt?: number;
  /**
   * the first attempt was logged before the Lease watch saw the release (or no release was seen). The watch
   * sees a release some ms after it was written, so an attempt just before that may still have found the lease
   * free: `waitedForRetry` says what it cost.
   */
  attemptedFirst?: boolean;
  /** acquired a retry period or more after the first attempt: that attempt found the lease held (a lost race) */
  waitedForRetry?: boolean;
  gapMs?: number;
  createToAttemptMs?: number;
  createToAcquireMs?: number;
}

/** Pure: one handover joined with the acquirer's log and its pod's first sight. */
export function raceOf(
  h: Handover,
  entries: readonly { t: number; text: string }[],
  createdAt: number | undefined,
  retryPeriodMs: number,
  meta: { mode: string; rollout: number; newPod: boolean; oldTerminalAt?: number },
): RaceHandover {
  const firstAttemptAt = entries.find((e) => /attempting to acquire leader lease/i.test(e.text))?.t;
  return {
    ...meta,
    waitedForRetry: firstAttemptAt === undefined ? undefined : h.acquiredAt - firstAttemptAt >= retryPeriodMs,
    lease: h.lease,
    oldHolder: h.oldHolder,
    newHolder: h.newHolder,
    stopAt: h.stopAt,
    releasedAt: h.releasedAt,
    firstAttemptAt,
    gapMs: h.gapMs,
    attemptedFirst: firstAttemptAt === undefined ? undefined : h.releasedAt === undefined || firstAttemptAt < h.releasedAt,
    createToAttemptMs: createdAt !== undefined && firstAttemptAt !== undefined ? firstAttemptAt - createdAt : undefined,
    createToAcquireMs: createdAt !== undefined ? h.acquiredAt - createdAt : undefined,
  };
}
