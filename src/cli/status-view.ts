// What `kubectl csi-handover` prints, as pure functions of what the operator records: the ClusterCSIDriver (spec,
// conditions), its CSIHandoverReport (the full report) and its Events. No cluster access here; the command feeds them in.
import { z } from 'zod';
import { formatGap, type HandoverRecord } from '../handover/measure.js';
import { HandoverReportObject, reportOwnerUid } from '../api/handover-report.js';
import { type HandoverReport, reportFromStatus } from '../handover/report.js';
import type { TimelineInput } from '../report/timeline-svg.js';
import { describeIssues } from '../issues.js';

const Condition = z.object({
  type: z.string(),
  status: z.string(),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
});
const Driver = z.object({
  metadata: z.object({ name: z.string(), uid: z.string().optional() }),
  spec: z.object({ managementState: z.string().optional(), logLevel: z.string().optional() }).passthrough().optional(),
  status: z
    .object({ conditions: z.array(Condition).nullish() })
    .passthrough()
    .optional(),
});
export type DriverObject = z.infer<typeof Driver>;

const Event = z.object({
  reason: z.string().optional(),
  message: z.string().optional(),
  type: z.string().optional(),
  count: z.number().optional(),
  lastTimestamp: z.string().nullish(),
  eventTime: z.string().nullish(),
  metadata: z.object({ creationTimestamp: z.string().optional() }),
});
export type EventObject = z.infer<typeof Event>;

/** A ClusterCSIDriver as `kubectl get -o json` prints it, checked; a clear error for anything else. */
export function parseDriver(json: unknown): DriverObject {
  const parsed = Driver.safeParse(json);
  if (!parsed.success) throw new Error(`not a ClusterCSIDriver: ${describeIssues(parsed.error)}`);
  return parsed.data;
}

/** The Events of an EventList that parse (one odd Event does not hide the rest). */
export function parseEvents(json: unknown): EventObject[] {
  const items = (json as { items?: unknown[] } | undefined)?.items ?? [];
  return items.flatMap((e) => {
    const parsed = Event.safeParse(e);
    return parsed.success ? [parsed.data] : [];
  });
}

/**
 * The driver's handovers from its CSIHandoverReport (`kubectl get -o json`, undefined when there is none), if that
 * report belongs to this CR: one left by an earlier CR of the same name is not its (the garbage collector removes it).
 */
export function driverReport(d: DriverObject, reportJson: unknown): HandoverReport | undefined {
  const parsed = HandoverReportObject.safeParse(reportJson);
  if (!parsed.success) return undefined;
  if (d.metadata.uid !== undefined && reportOwnerUid(parsed.data) !== d.metadata.uid) return undefined;
  return reportFromStatus(parsed.data.status);
}

const eventTime = (e: EventObject): number => Date.parse(e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? '') || 0;

/** "3s", "5m", "2h", "4d" ago from `now`. */
export function age(ms: number, now: number): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function table(rows: string[][]): string[] {
  const widths = rows.reduce<number[]>((w, r) => r.map((c, i) => Math.max(w[i] ?? 0, c.length)), []);
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

const EVENT_TEXT = 140;

const gapText = (h: HandoverRecord): string => (h.gapMs === undefined ? 'not timed' : formatGap(h.gapMs));

export function formatStatus(d: DriverObject, report: HandoverReport | undefined, events: readonly EventObject[], now: number): string {
  const out: string[] = [`ClusterCSIDriver ${d.metadata.name}`];
  out.push(`  managementState: ${d.spec?.managementState ?? '(unset)'}    logLevel: ${d.spec?.logLevel ?? '(unset: Normal)'}`);
  const conditions = d.status?.conditions ?? [];
  out.push('');
  if (conditions.length === 0) out.push('No conditions yet: the operator has not reconciled this driver (is it running?).');
  else {
    out.push(
      ...table([
        ['CONDITION', 'STATUS', 'REASON', 'SINCE', 'MESSAGE'],
        ...conditions.map((c) => [c.type, c.status, c.reason ?? '', c.lastTransitionTime ? age(Date.parse(c.lastTransitionTime), now) : '', c.message ?? '']),
      ]),
    );
  }
  out.push('');
  if (!report) out.push('No lease handover recorded yet.');
  else {
    const largest = Math.max(...report.leases.map((h) => h.gapMs ?? -1));
    const last = Math.max(...report.leases.map((h) => h.acquiredAt));
    out.push(`Last rollout: ${report.leases.length} lease(s), completed ${age(last, now)} ago, largest gap ${largest >= 0 ? formatGap(largest) : 'not timed'}`);
    out.push(
      ...table([
        ['LEASE', 'OLD HOLDER', '', 'NEW HOLDER', 'GAP', 'RELEASED BY'],
        ...report.leases.map((h) => [
          `${h.namespace}/${h.lease}`,
          h.oldHolder,
          '→',
          h.newHolder,
          gapText(h),
          h.releasedBy === 'expiry' ? 'nobody (expired)' : h.releasedBy,
        ]),
      ]).map((l) => `  ${l}`),
    );
    const t = report.totals;
    out.push(
      `Since the operator started reporting: ${t.handovers} handover(s); released by the operator ${t.releasedByOperator}, by the holder ${t.releasedByHolder}, expired ${t.expired}`,
    );
  }
  const recent = [...events].sort((a, b) => eventTime(b) - eventTime(a)).slice(0, 5);
  if (recent.length) {
    out.push('', 'Recent events:');
    // An Event names up to every lease of a rollout: the first line's worth here, the rest in the table above.
    const short = (m: string) => (m.length > EVENT_TEXT ? `${m.slice(0, EVENT_TEXT - 1)}…` : m);
    out.push(
      ...table(
        recent.map((e) => [age(eventTime(e), now), e.type ?? '', e.reason ?? '', e.count && e.count > 1 ? `(x${e.count})` : '', short(e.message ?? '')]),
      ).map((l) => `  ${l}`),
    );
  }
  return `${out.join('\n')}\n`;
}

/** When a lease stopped having a leader: the old leader told to stop, else its release, else the new holder's acquire. */
const leaderlessFrom = (h: HandoverRecord): number => h.stopAt ?? h.releasedAt ?? h.acquiredAt;

function window(report: HandoverReport): { from: number; to: number } {
  const start = Math.min(...report.leases.map(leaderlessFrom));
  const end = Math.max(...report.leases.map((h) => h.acquiredAt));
  const pad = Math.max(50, (end - start) * 0.1);
  return { from: start - pad, to: end + pad };
}

const OLD = '▓';
const NONE = '·';
const NEW = '█';
const RELEASE = '|';

/**
 * The last rollout in the terminal: per lease, the old holder until it was told to stop, the leaderless gap (a
 * `|` where the lease was released), the new holder from its acquire; `width` columns of chart.
 */
export function formatTimeline(driver: string, report: HandoverReport | undefined, width = 60): string {
  if (!report) return `No lease handover recorded for ${driver} yet.\n`;
  const { from, to } = window(report);
  const span = to - from;
  const col = (t: number) => Math.min(width - 1, Math.max(0, Math.floor(((t - from) / span) * width)));
  const label = (h: HandoverRecord) => {
    const l = `${h.namespace}/${h.lease}`;
    return l.length > 44 ? `${l.slice(0, 43)}…` : l;
  };
  const labelWidth = Math.max(...report.leases.map((h) => label(h).length));
  const rows = report.leases.map((h) => {
    const cells = Array.from({ length: width }, (_, c): string => {
      const t = from + ((c + 0.5) / width) * span;
      return t < leaderlessFrom(h) ? OLD : t < h.acquiredAt ? NONE : NEW;
    });
    // A gap shorter than one column still shows.
    if (h.acquiredAt > leaderlessFrom(h) && col(leaderlessFrom(h)) === col(h.acquiredAt)) cells[col(h.acquiredAt)] = NONE;
    if (h.releasedAt !== undefined) cells[col(h.releasedAt)] = RELEASE;
    const who = h.releasedBy === 'expiry' ? 'expired' : `released by ${h.releasedBy}`;
    return `${label(h).padEnd(labelWidth)}  ${cells.join('')}  ${gapText(h)}, ${who}`;
  });
  const start = new Date(from).toISOString().slice(11, 23);
  const axis = `${''.padEnd(labelWidth)}  ${start}${`+${formatGap(span)}`.padStart(width - start.length)}`;
  return `${[
    `Last rollout of ${driver} (UTC):`,
    axis,
    ...rows,
    '',
    `${OLD} old holder (until told to stop)  ${NONE} no leader  ${RELEASE} released  ${NEW} new holder`,
  ].join('\n')}\n`;
}

/** The same rollout as the benchmarks' SVG picture draws it. */
export function timelineSvgInput(driver: string, report: HandoverReport): TimelineInput {
  const { from, to } = window(report);
  const stops = new Map<string, number>();
  for (const h of report.leases) if (h.stopAt !== undefined) stops.set(h.oldHolder, Math.min(stops.get(h.oldHolder) ?? Infinity, h.stopAt));
  return {
    title: `${driver}: last rollout, ${report.leases.length} lease(s)`,
    from,
    to,
    leases: report.leases.map((h) => ({
      label: h.lease,
      segments: [
        { holder: h.oldHolder, from, to: leaderlessFrom(h) },
        { holder: h.newHolder, from: h.acquiredAt, to },
      ],
      gaps: h.acquiredAt > leaderlessFrom(h) ? [{ from: leaderlessFrom(h), to: h.acquiredAt }] : [],
    })),
    stops: [...stops].map(([pod, at]) => ({ pod, at })),
  };
}
