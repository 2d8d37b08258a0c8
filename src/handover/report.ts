// What a driver's handovers were: the last handover of each of its leases and running totals, kept in the status of
// the driver's CSIHandoverReport (src/api/handover-report.ts) and summed up in its CR's conditions. It is
// level-based: seeded from that report when the operator (re)starts, so a restart, an upgrade or a new leader keeps
// the last gap a user saw. It belongs to one ClusterCSIDriver by UID: a CR deleted and created again starts clean.
import { z } from 'zod';
import { formatGap, type HandoverRecord } from './measure.js';

export interface HandoverTotals {
  handovers: number;
  releasedByOperator: number;
  releasedByHolder: number;
  expired: number;
}
export interface HandoverReport {
  /** the last handover of each lease, by namespace then name */
  leases: HandoverRecord[];
  totals: HandoverTotals;
}

const emptyTotals = (): HandoverTotals => ({ handovers: 0, releasedByOperator: 0, releasedByHolder: 0, expired: 0 });

/** The report with one more handover: it replaces that lease's previous one and counts in the totals. */
export function withHandover(report: HandoverReport | undefined, h: HandoverRecord): HandoverReport {
  const same = (x: HandoverRecord) => x.namespace === h.namespace && x.lease === h.lease;
  const totals = { ...(report?.totals ?? emptyTotals()) };
  totals.handovers++;
  if (h.releasedBy === 'operator') totals.releasedByOperator++;
  else if (h.releasedBy === 'holder') totals.releasedByHolder++;
  else totals.expired++;
  const leases = [...(report?.leases ?? []).filter((x) => !same(x)), h].sort(
    (a, b) => a.namespace.localeCompare(b.namespace) || a.lease.localeCompare(b.lease),
  );
  return { leases, totals };
}

/** How a handover reads in its Events and log line. */
export function handoverMessage(h: HandoverRecord): string {
  const gap = h.gapMs === undefined ? 'the old holder was not stopped' : `leaderless ${formatGap(h.gapMs)} after the old leader was told to stop`;
  return `lease ${h.namespace}/${h.lease}: ${h.oldHolder} → ${h.newHolder}, ${gap}, released by ${h.releasedBy}`;
}

/** The API server keeps an Event's message whole up to here; kubectl shows it on one line. */
export const EVENT_MESSAGE_MAX = 1024;

/**
 * One Event for the handovers a driver saw together (a rollout hands several leases over within a second): the
 * single-lease message for one, else every lease's line, cut short with a count of the rest at the size limit.
 */
export function handoversMessage(hs: readonly HandoverRecord[]): string {
  const [only] = hs;
  if (hs.length === 1 && only) return handoverMessage(only);
  const head = `${hs.length} leases handed over`;
  const lines = hs.map((h) => `${handoverMessage(h).slice('lease '.length)}`);
  let message = `${head}: ${lines.join('; ')}`;
  for (let kept = lines.length - 1; message.length > EVENT_MESSAGE_MAX && kept >= 0; kept--) {
    message = `${head}: ${lines.slice(0, kept).join('; ')}${kept ? '; ' : ''}… and ${lines.length - kept} more (the CSIHandoverReport lists them)`;
  }
  return message;
}

// ---- the CSIHandoverReport's status, both ways ----

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
const seconds = (ms: number | undefined) => (ms === undefined ? undefined : Math.round(ms) / 1000);

/** The CSIHandoverReport's status. */
export function handoverStatus(report: HandoverReport): Record<string, unknown> {
  const gaps = report.leases.flatMap((h) => (h.gapMs === undefined ? [] : [h.gapMs]));
  const largest = gaps.length ? Math.max(...gaps) : undefined;
  const stops = report.leases.flatMap((h) => (h.stopAt === undefined ? [] : [h.stopAt]));
  return {
    lastRollout: {
      startedAt: iso(stops.length ? Math.min(...stops) : undefined),
      completedAt: iso(Math.max(...report.leases.map((h) => h.acquiredAt))),
      largestGap: largest === undefined ? undefined : formatGap(largest),
      largestGapSeconds: seconds(largest),
      leases: report.leases.map((h) => ({
        lease: h.lease,
        namespace: h.namespace,
        oldHolder: h.oldHolder,
        newHolder: h.newHolder,
        stopTime: iso(h.stopAt),
        releaseTime: iso(h.releasedAt),
        acquireTime: iso(h.acquiredAt),
        releasedBy: h.releasedBy,
        gapSeconds: seconds(h.gapMs),
      })),
    },
    totals: report.totals,
  };
}

const time = z
  .string()
  .optional()
  .transform((s, ctx) => {
    if (s === undefined) return undefined;
    const ms = Date.parse(s);
    if (Number.isNaN(ms)) ctx.addIssue({ code: 'custom', message: `not a time: ${s}` });
    return ms;
  });
const count = z.number().int().nonnegative();
const HandoverStatus = z.object({
  lastRollout: z.object({
    leases: z.array(
      z.object({
        lease: z.string(),
        namespace: z.string(),
        oldHolder: z.string(),
        newHolder: z.string(),
        stopTime: time,
        releaseTime: time,
        acquireTime: time,
        releasedBy: z.enum(['holder', 'operator', 'expiry']),
        gapSeconds: z.number().nonnegative().optional(),
      }),
    ),
  }),
  totals: z.object({ handovers: count, releasedByOperator: count, releasedByHolder: count, expired: count }),
});

/** The report a CSIHandoverReport's status holds, or undefined when it holds none we can read (then we start afresh). */
export function reportFromStatus(status: unknown): HandoverReport | undefined {
  const parsed = HandoverStatus.safeParse(status);
  if (!parsed.success) return undefined;
  const leases = parsed.data.lastRollout.leases.flatMap((l): HandoverRecord[] =>
    l.acquireTime === undefined
      ? []
      : [
          {
            namespace: l.namespace,
            lease: l.lease,
            oldHolder: l.oldHolder,
            newHolder: l.newHolder,
            stopAt: l.stopTime,
            releasedAt: l.releaseTime,
            releasedBy: l.releasedBy,
            acquiredAt: l.acquireTime,
            gapMs: l.gapSeconds === undefined ? undefined : l.gapSeconds * 1000,
          },
        ],
  );
  return leases.length ? { leases, totals: parsed.data.totals } : undefined;
}

// Two replicas see the same handover a few milliseconds apart.
const SAME_HANDOVER_MS = 10_000;
const sameHandover = (a: HandoverRecord, b: HandoverRecord): boolean =>
  a.namespace === b.namespace &&
  a.lease === b.lease &&
  a.oldHolder === b.oldHolder &&
  a.newHolder === b.newHolder &&
  Math.abs(a.acquiredAt - b.acquiredAt) < SAME_HANDOVER_MS;

/**
 * Every driver's report. The leader's is its CSIHandoverReport's (seeded from it the first time it is asked for)
 * plus what it observes. A standby keeps what it observes aside, by lease: when it starts leading, those handovers
 * the report lacks (the old leader died before writing them) are added; the report's own stand, whatever this
 * replica timed a few milliseconds differently. A report belongs to one ClusterCSIDriver by UID (`owner` says the
 * current CR's): when the CR is deleted and created again under the same name, its report starts clean.
 */
export class HandoverReports {
  /** driver → the report and the UID of the CR it belongs to (undefined: no CR seen) */
  private readonly reports = new Map<string, { uid: string | undefined; report: HandoverReport }>();
  /** driver → lease → the last handover seen while standing by */
  private readonly seenAside = new Map<string, Map<string, HandoverRecord>>();
  private leading = false;

  constructor(
    /** The report stored for the driver's CR of this UID, if any (one of an older CR of the same name is not it). */
    private readonly seed: (driver: string, uid: string | undefined) => HandoverReport | undefined,
    /** The UID of the driver's ClusterCSIDriver now. */
    private readonly owner: (driver: string) => string | undefined = () => undefined,
  ) {}

  get(driver: string): HandoverReport | undefined {
    const uid = this.owner(driver);
    const known = this.reports.get(driver);
    if (known && known.uid === uid) return known.report;
    const seeded = this.seed(driver, uid);
    if (seeded) this.reports.set(driver, { uid, report: seeded });
    else this.reports.delete(driver);
    return seeded;
  }

  private put(driver: string, h: HandoverRecord): void {
    this.reports.set(driver, { uid: this.owner(driver), report: withHandover(this.get(driver), h) });
  }

  /** A handover observed: part of the report when leading, kept aside otherwise. True when the report changed. */
  add(driver: string, h: HandoverRecord): boolean {
    if (!this.leading) {
      const aside = this.seenAside.get(driver) ?? new Map<string, HandoverRecord>();
      aside.set(`${h.namespace}/${h.lease}`, h);
      this.seenAside.set(driver, aside);
      return false;
    }
    this.put(driver, h);
    return true;
  }

  /**
   * This replica lost its leadership and stands by again: what it reported is kept aside like any observation, so
   * a handover it had not written yet is not lost if it leads again (the stored report's record wins if it has it).
   */
  stopLeading(): void {
    if (!this.leading) return;
    this.leading = false;
    for (const [driver, { report }] of this.reports) {
      const aside = this.seenAside.get(driver) ?? new Map<string, HandoverRecord>();
      for (const h of report.leases) {
        const key = `${h.namespace}/${h.lease}`;
        const seen = aside.get(key);
        if (!seen || seen.acquiredAt < h.acquiredAt) aside.set(key, h);
      }
      this.seenAside.set(driver, aside);
    }
    this.reports.clear();
  }

  /** This replica leads from now on: reports start from the stored ones, with what it saw aside that they lack. Returns the drivers whose report changed. */
  startLeading(): string[] {
    this.leading = true;
    this.reports.clear();
    const changed: string[] = [];
    for (const [driver, aside] of this.seenAside) {
      for (const h of aside.values()) {
        const reported = this.get(driver)?.leases.find((x) => x.namespace === h.namespace && x.lease === h.lease);
        if (reported && (sameHandover(reported, h) || reported.acquiredAt >= h.acquiredAt)) continue;
        this.put(driver, h);
        changed.push(driver);
      }
    }
    this.seenAside.clear();
    return [...new Set(changed)];
  }
}
