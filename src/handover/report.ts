// What a driver's CR tells of its handovers: the last handover of each of its leases and running totals. It is
// level-based: seeded from the CR's own status.handover when the operator (re)starts, so a restart, an upgrade
// or a new leader keeps the last gap a user saw. On OpenShift's CRD status.handover is pruned; the condition
// (src/status/conditions.ts; its message carries the summary) is then kept until a new handover replaces it.
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
    message = `${head}: ${lines.slice(0, kept).join('; ')}${kept ? '; ' : ''}… and ${lines.length - kept} more (status.handover lists them)`;
  }
  return message;
}

// ---- status.handover, both ways ----

const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
const seconds = (ms: number | undefined) => (ms === undefined ? undefined : Math.round(ms) / 1000);

/** Our CRD's status.handover extension. */
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

/** The report a CR's status.handover holds, or undefined when it holds none we can read (then we start afresh). */
export function reportFromStatus(status: unknown): HandoverReport | undefined {
  const parsed = HandoverStatus.safeParse((status as { handover?: unknown } | undefined)?.handover);
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
 * Every driver's report. The leader's is the CR's (seeded from its status.handover the first time it is asked
 * for) plus what it observes. A standby keeps what it observes aside, by lease: when it starts leading, those
 * handovers the CR does not report yet (the old leader died before writing them) are added; the CR's own
 * stand, whatever this replica timed a few milliseconds differently.
 */
export class HandoverReports {
  private readonly reports = new Map<string, HandoverReport>();
  /** driver → lease → the last handover seen while standing by */
  private readonly seenAside = new Map<string, Map<string, HandoverRecord>>();
  private leading = false;

  constructor(private readonly seed: (driver: string) => HandoverReport | undefined) {}

  get(driver: string): HandoverReport | undefined {
    const known = this.reports.get(driver);
    if (known) return known;
    const seeded = this.seed(driver);
    if (seeded) this.reports.set(driver, seeded);
    return seeded;
  }

  /** A handover observed: part of the report when leading, kept aside otherwise. True when the report changed. */
  add(driver: string, h: HandoverRecord): boolean {
    if (!this.leading) {
      const aside = this.seenAside.get(driver) ?? new Map<string, HandoverRecord>();
      aside.set(`${h.namespace}/${h.lease}`, h);
      this.seenAside.set(driver, aside);
      return false;
    }
    this.reports.set(driver, withHandover(this.get(driver), h));
    return true;
  }

  /**
   * This replica lost its leadership and stands by again: what it reported is kept aside like any observation, so
   * a handover it had not written to its CR yet is not lost if it leads again (the CR's own record wins if it has it).
   */
  stopLeading(): void {
    if (!this.leading) return;
    this.leading = false;
    for (const [driver, report] of this.reports) {
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

  /** This replica leads from now on: reports start from the CRs, with what it saw aside that they lack. Returns the drivers whose report changed. */
  startLeading(): string[] {
    this.leading = true;
    this.reports.clear();
    const changed: string[] = [];
    for (const [driver, aside] of this.seenAside) {
      for (const h of aside.values()) {
        const reported = this.get(driver)?.leases.find((x) => x.namespace === h.namespace && x.lease === h.lease);
        if (reported && (sameHandover(reported, h) || reported.acquiredAt >= h.acquiredAt)) continue;
        this.reports.set(driver, withHandover(this.get(driver), h));
        changed.push(driver);
      }
    }
    this.seenAside.clear();
    return [...new Set(changed)];
  }
}
