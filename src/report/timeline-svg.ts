// A standalone SVG picture of one rollout: who held each lease when, the leaderless gaps, when each old pod
// was told to stop, and (optionally) the storage operations waiting underneath, so a stall lines up with the
// gap that caused it. Pure and deterministic: the same input renders the same bytes.
import { PROBE_KINDS, type ProbeOp, probeStats, waitMs } from './probe-stats.js';

export interface TimelineLease {
  label: string;
  segments: { holder: string; from: number; to: number }[];
  gaps: { from: number; to: number }[];
}

export interface TimelineInput {
  title: string;
  /** ms since epoch */
  from: number;
  to: number;
  leases: TimelineLease[];
  stops?: { pod: string; at: number }[];
  ops?: ProbeOp[];
}

const WIDTH = 1000;
const PLOT_LEFT = 180;
const PLOT_RIGHT = WIDTH - 20;
const LEASE_ROW = 26;
const OPS_BAND = 40; // the most height one kind's row may take, however many ops overlap
const SLOW_OP_MS = 5_000;
// Tableau 10 without its red: red means "no leader" here.
const HOLDER_COLOURS = ['#1f77b4', '#2ca02c', '#9467bd', '#17becf', '#8c564b', '#bcbd22', '#7f7f7f', '#aec7e8', '#98df8a', '#c5b0d5'];
const TICK_STEPS_S = [0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];
const MAX_TICKS = 12;

export function renderTimeline(input: TimelineInput): string {
  const span = Math.max(1, input.to - input.from);
  const x = (t: number) => PLOT_LEFT + ((Math.min(Math.max(t, input.from), input.to) - input.from) / span) * (PLOT_RIGHT - PLOT_LEFT);
  const stops = [...(input.stops ?? [])].sort((a, b) => a.at - b.at);
  const holders = holdersInOrder(input.leases);
  const short = shortener([...holders, ...stops.map((s) => s.pod)]);
  const colour = new Map(holders.map((h, i) => [h, HOLDER_COLOURS[i % HOLDER_COLOURS.length] ?? '#777']));

  const body: string[] = [];
  let y = 30;
  body.push(`<text class="title" x="10" y="22">${esc(input.title)}</text>`);

  // Legend, wrapped onto as many lines as it needs (text width estimated: no font metrics without a renderer).
  let lx = PLOT_LEFT;
  for (const h of holders) {
    const w = 20 + short(h).length * 7 + 16;
    if (lx + w > PLOT_RIGHT && lx > PLOT_LEFT) {
      lx = PLOT_LEFT;
      y += 16;
    }
    body.push(
      `<g class="legend-entry"><rect x="${n(lx)}" y="${y}" width="12" height="12" fill="${colour.get(h)}"/><text x="${n(lx + 16)}" y="${y + 10}">${esc(short(h))}<title>${esc(h)}</title></text></g>`,
    );
    lx += w;
  }
  y += holders.length > 0 ? 28 : 8;

  // Stop labels staggered over three lines so close SIGTERMs stay readable.
  const stopLabelY = y;
  y += Math.min(stops.length, 3) * 12 + (stops.length > 0 ? 4 : 0);

  const rowsTop = y;
  const rows: string[] = [];
  for (const lease of input.leases) {
    const mid = y + LEASE_ROW / 2;
    rows.push(`<text class="row-label" x="${PLOT_LEFT - 8}" y="${mid + 4}">${esc(lease.label)}</text>`);
    for (const s of lease.segments) {
      if (s.to < input.from || s.from > input.to) continue;
      rows.push(
        `<rect class="segment" x="${n(x(s.from))}" y="${y + 4}" width="${n(x(s.to) - x(s.from))}" height="${LEASE_ROW - 8}" fill="${colour.get(s.holder)}"><title>${esc(`${s.holder}: ${seconds(s.from - input.from)} → ${seconds(s.to - input.from)}`)}</title></rect>`,
      );
    }
    for (const g of lease.gaps) {
      if (g.to < input.from || g.from > input.to) continue;
      // At least 2px wide: a sub-second gap in a long rollout must still show.
      const gx = x(g.from);
      const gw = Math.max(2, x(g.to) - gx);
      const label = duration(g.to - g.from);
      const textWidth = label.length * 6.5;
      // Inside the gap when it fits, else beside it, on whichever side stays in the picture.
      const [lx, anchor] = gw >= textWidth + 6 ? [gx + gw / 2, 'middle'] : gx + gw + 3 + textWidth <= PLOT_RIGHT ? [gx + gw + 3, 'start'] : [gx - 3, 'end'];
      rows.push(`<rect class="gap" x="${n(gx)}" y="${y + 2}" width="${n(gw)}" height="${LEASE_ROW - 4}"/>`);
      rows.push(`<text class="gap-label" x="${n(lx)}" y="${mid + 4}" text-anchor="${anchor}">${label}</text>`);
    }
    y += LEASE_ROW;
  }

  if (input.ops !== undefined && input.ops.length > 0) {
    y += 8;
    const stalls = new Map(probeStats(input.ops, input.to).map((s) => [s.kind, s.stallMs]));
    for (const kind of PROBE_KINDS) {
      const mine = input.ops.filter((o) => o.kind === kind);
      if (mine.length === 0) continue;
      const lanes = laneOf(mine, input.to);
      const laneCount = Math.max(...lanes.values()) + 1;
      const pitch = Math.min(4, OPS_BAND / laneCount);
      const height = laneCount * pitch + 8;
      rows.push(
        `<g class="ops-row" data-kind="${kind}"><text class="row-label" x="${PLOT_LEFT - 8}" y="${n(y + Math.max(height, 20) / 2 + 4)}">${kind} <tspan class="stall">stall ${duration(stalls.get(kind) ?? 0)}</tspan></text>`,
      );
      for (const o of mine) {
        const ly = y + 4 + (lanes.get(o) ?? 0) * pitch + pitch / 2;
        const cls = o.doneAt === undefined ? 'op unfinished' : waitMs(o, input.to) > SLOW_OP_MS ? 'op slow' : 'op';
        rows.push(
          `<line class="${cls}" x1="${n(x(o.submittedAt))}" y1="${n(ly)}" x2="${n(Math.max(x(o.doneAt ?? input.to), x(o.submittedAt) + 1))}" y2="${n(ly)}" stroke-width="${n(Math.max(0.5, pitch - 1))}"><title>${esc(`${o.name}: ${duration(waitMs(o, input.to))}${o.doneAt === undefined ? ', unfinished' : ''}`)}</title></line>`,
        );
      }
      rows.push('</g>');
      y += Math.max(height, 20);
    }
  }
  const rowsBottom = y;

  // Grid and axis.
  const step = tickStepMs(span);
  const grid: string[] = [];
  const axisY = rowsBottom + 6;
  grid.push(`<line class="axis" x1="${PLOT_LEFT}" y1="${axisY}" x2="${PLOT_RIGHT}" y2="${axisY}"/>`);
  for (let i = 0; i * step <= span; i++) {
    const tx = n(x(input.from + i * step));
    grid.push(`<line class="grid" x1="${tx}" y1="${rowsTop}" x2="${tx}" y2="${axisY + 4}"/>`);
    grid.push(`<text class="tick" x="${tx}" y="${axisY + 16}">${seconds(i * step)}</text>`);
  }
  y = axisY + 32;

  const stopLines = stops.map((s, i) => {
    const sx = n(x(s.at));
    return `<g class="stop"><line x1="${sx}" y1="${stopLabelY + (i % 3) * 12 + 2}" x2="${sx}" y2="${rowsBottom}"/><text x="${n(x(s.at) + 2)}" y="${stopLabelY + (i % 3) * 12 + 9}">SIGTERM ${esc(short(s.pod))}</text></g>`;
  });

  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y}" viewBox="0 0 ${WIDTH} ${y}" font-family="sans-serif" font-size="11">`,
    '<defs>',
    '<pattern id="gap-hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fdd"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d62728" stroke-width="3"/></pattern>',
    '<style>',
    '.title { font-size: 15px; font-weight: bold; }',
    '.row-label { text-anchor: end; }',
    '.gap { fill: url(#gap-hatch); stroke: #d62728; stroke-width: 1; }',
    '.gap-label { fill: #d62728; font-weight: bold; paint-order: stroke; stroke: #fff; stroke-width: 3px; }',
    '.stall { fill: #888; font-size: 9px; }',
    '.op { stroke: #999; }',
    '.op.slow { stroke: #ff7f0e; }',
    '.op.unfinished { stroke: #d62728; }',
    '.axis { stroke: #333; }',
    '.grid { stroke: #eee; }',
    '.tick { text-anchor: middle; fill: #333; }',
    '.stop line { stroke: #555; stroke-dasharray: 4 3; }',
    '.stop text { fill: #555; font-size: 9px; }',
    '</style>',
    '</defs>',
    `<rect width="${WIDTH}" height="${y}" fill="#fff"/>`,
    ...grid,
    ...body,
    ...rows,
    ...stopLines,
    '</svg>',
    '',
  ].join('\n');
}

/** Smallest step from TICK_STEPS_S that keeps the axis at MAX_TICKS ticks or fewer (0 included). */
function tickStepMs(spanMs: number): number {
  const s = TICK_STEPS_S.find((step) => Math.floor(spanMs / (step * 1000)) + 1 <= MAX_TICKS) ?? Math.ceil(spanMs / 1000 / (MAX_TICKS - 1) / 3600) * 3600;
  return s * 1000;
}

/** Distinct holders by when they first held a lease, so colours follow the rollout's order. */
function holdersInOrder(leases: readonly TimelineLease[]): string[] {
  const first = new Map<string, number>();
  for (const l of leases) for (const s of l.segments) first.set(s.holder, Math.min(first.get(s.holder) ?? Infinity, s.from));
  return [...first].sort(([a, ta], [b, tb]) => ta - tb || a.localeCompare(b)).map(([h]) => h);
}

/**
 * Strips the prefix every name shares, cut back to a `-` so only whole words go (`csi-hostpath-controller-`),
 * and never the whole of a name.
 */
export function shortener(names: readonly string[]): (name: string) => string {
  const [firstName, ...rest] = names;
  const shortest = Math.min(...names.map((name) => name.length));
  if (firstName === undefined || shortest < 2) return (name) => name;
  let prefix = firstName;
  for (const name of rest) while (!name.startsWith(prefix)) prefix = prefix.slice(0, -1);
  const cut = prefix.lastIndexOf('-', shortest - 2) + 1;
  return (name) => (name.startsWith(prefix.slice(0, cut)) ? name.slice(cut) : name);
}

/** Packs ops into lanes, each in the first lane free by its submit time. */
function laneOf(ops: readonly ProbeOp[], windowEnd: number): Map<ProbeOp, number> {
  const laneEnds: number[] = [];
  const out = new Map<ProbeOp, number>();
  for (const o of [...ops].sort((a, b) => a.submittedAt - b.submittedAt)) {
    let lane = laneEnds.findIndex((end) => end < o.submittedAt);
    if (lane === -1) lane = laneEnds.length;
    laneEnds[lane] = o.doneAt ?? windowEnd;
    out.set(o, lane);
  }
  return out;
}

/** `0.7s` under a minute, `2m 18s` from one. */
export function duration(ms: number): string {
  const tenths = Math.round(ms / 100);
  if (tenths < 600) return `${(tenths / 10).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m ${s % 60}s`;
}

/** Axis labels: seconds since `from`, without a trailing `.0`. */
function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(1))}s`;
}

/** Coordinates to a tenth of a pixel keep the document small and its bytes stable. */
function n(v: number): string {
  return String(Math.round(v * 10) / 10);
}

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] ?? c);
}
