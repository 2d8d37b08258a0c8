// Where a handover's time goes, per lease: every step from the old leader's SIGTERM to the new holder's
// acquisition, each from its own witness — the node's record (SIGTERM, exits, sandbox and container starts),
// API watches here (the witness's evidence (and the instant it names), the kubelet's report, the new pod's creation and binding, the
// release, the acquisition) and the new sidecar's own log (its first attempt). Pure: the inputs are collected
// by measure-rollout.ts, the output is printed by make bench and make demo.
import type { NodeEvent } from '../lib/node-events.js';
import { gapStats, type Handover } from './handovers.js';

/** What a Pod watch saw of one pod, times of arrival here (ms). */
export interface PodSightings {
  name: string;
  uid?: string;
  node?: string;
  addedAt?: number;
  boundAt?: number;
  /** the node witness's condition first seen */
  witnessAt?: number;
  /** the instant the witness says it found every container exited (its condition's message, the node's clock) */
  exitedBy?: number;
  /** the kubelet's report of every container terminated, first seen */
  reportedAt?: number;
}

/** Milliseconds after the old leader's SIGTERM (undefined: not seen). */
export interface LeaseTimeline {
  lease: string;
  sidecar: string;
  oldPod: string;
  /** the old leader's node, as its own record names it */
  oldNode?: string;
  newPod: string;
  sigterm?: number;
  lastExit?: number;
  proven?: number;
  evidence?: number;
  kubeletReport?: number;
  released?: number;
  newPodCreated?: number;
  newPodBound?: number;
  sandboxStarted?: number;
  sidecarStarted?: number;
  firstAttempt?: number;
  acquired: number;
}

export const TIMELINE_STEPS = [
  'lastExit',
  'proven',
  'evidence',
  'kubeletReport',
  'released',
  'newPodCreated',
  'newPodBound',
  'sandboxStarted',
  'sidecarStarted',
  'firstAttempt',
  'acquired',
] as const satisfies readonly (keyof LeaseTimeline)[];

/** The column heads of TIMELINE_STEPS, in order. */
export const TIMELINE_HEADS = ['exit', 'proven', 'evidence', 'kubelet', 'release', 'created', 'bound', 'sandbox', 'started', 'tries', 'acquired'];

const latest = (ts: number[]): number | undefined => (ts.length ? Math.max(...ts) : undefined);
const earliest = (ts: number[]): number | undefined => (ts.length ? Math.min(...ts) : undefined);

export function leaseTimelines(
  handovers: readonly Handover[],
  sidecarOf: (lease: string) => string,
  pods: ReadonlyMap<string, PodSightings>,
  events: readonly NodeEvent[],
  /** pod name → container → when its log first says it attempts to acquire a lease (ms) */
  attempts: ReadonlyMap<string, ReadonlyMap<string, number>>,
): LeaseTimeline[] {
  return handovers.map((h) => {
    const sidecar = sidecarOf(h.lease);
    const t0 = h.stopAt;
    const rel = (t: number | undefined) => (t === undefined || t0 === undefined ? undefined : t - t0);
    const of = (pod: string, kind: NodeEvent['event'], container?: string) =>
      events.filter((e) => e.pod === pod && e.event === kind && (container === undefined || e.container === container)).map((e) => Date.parse(e.t));
    const oldPod = pods.get(h.oldHolder);
    const newPod = pods.get(h.newHolder);
    return {
      lease: h.lease,
      sidecar,
      oldPod: h.oldHolder,
      oldNode: events.find((e) => e.pod === h.oldHolder)?.node ?? oldPod?.node,
      newPod: h.newHolder,
      sigterm: t0 === undefined ? undefined : 0,
      lastExit: rel(latest(of(h.oldHolder, 'container-exited').filter((t) => t0 === undefined || t >= t0))),
      proven: rel(oldPod?.exitedBy),
      evidence: rel(oldPod?.witnessAt),
      kubeletReport: rel(oldPod?.reportedAt),
      released: rel(h.releasedAt),
      newPodCreated: rel(newPod?.addedAt),
      newPodBound: rel(newPod?.boundAt),
      sandboxStarted: rel(earliest(of(h.newHolder, 'pod-started'))),
      sidecarStarted: rel(earliest(of(h.newHolder, 'container-started', sidecar))),
      firstAttempt: rel(attempts.get(h.newHolder)?.get(sidecar)),
      acquired: rel(h.acquiredAt) ?? NaN,
    };
  });
}

/** The witness's and the handover's figures for the old leaders on one kind of node (p50s, ms after SIGTERM). */
export interface RuntimeFigures {
  runtime: string;
  /** handovers whose old leader ran on such a node */
  count: number;
  /** the instant the witness found every container exited */
  proven?: number;
  released?: number;
  /** SIGTERM → the new holder: the gap */
  gap?: number;
}

/**
 * The timelines grouped by the container runtime of the old leader's node (`runtimeOf`: node → runtime, as the
 * kubelet reports it): does the witness prove deaths as early on a CRI-O node as on a containerd one?
 * Timelines whose node is unknown are left out.
 */
export function figuresByRuntime(rows: readonly LeaseTimeline[], runtimeOf: ReadonlyMap<string, string>): RuntimeFigures[] {
  const groups = new Map<string, LeaseTimeline[]>();
  for (const r of rows) {
    const runtime = r.oldNode === undefined ? undefined : runtimeOf.get(r.oldNode);
    if (runtime !== undefined) groups.set(runtime, [...(groups.get(runtime) ?? []), r]);
  }
  const p50 = (group: LeaseTimeline[], k: 'proven' | 'released' | 'acquired') =>
    gapStats(group.map((t) => t[k]).filter((v): v is number => v !== undefined && !Number.isNaN(v)))?.p50;
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([runtime, group]) => ({ runtime, count: group.length, proven: p50(group, 'proven'), released: p50(group, 'released'), gap: p50(group, 'acquired') }));
}

/** One line per runtime: how many handovers, and the p50s, in seconds after SIGTERM. */
export function formatRuntimeFigures(figures: readonly RuntimeFigures[]): string[] {
  const s = (v: number | undefined) => (v === undefined ? '—' : `${(v / 1000).toFixed(2)}s`);
  return figures.map(
    (f) =>
      `${f.runtime.padEnd(10)} ${String(f.count).padStart(3)} handover(s): SIGTERM → proven p50 ${s(f.proven)}, → release ${s(f.released)}, gap ${s(f.gap)}`,
  );
}

/** A fixed-width table: one line per lease, a column per step, seconds after SIGTERM. */
export function formatTimelines(rows: readonly LeaseTimeline[]): string {
  const heads = TIMELINE_HEADS;
  const cell = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '—' : (v / 1000).toFixed(2));
  const lines = [`${'sidecar (s after SIGTERM)'.padEnd(40)} ${heads.map((h) => h.padStart(8)).join(' ')}`];
  for (const r of rows) lines.push(`${r.sidecar.padEnd(40)} ${TIMELINE_STEPS.map((k) => cell(r[k]).padStart(8)).join(' ')}`);
  return lines.join('\n');
}

// "2026-12-03T12:03:56.675857708Z stderr F I1203 12:03:56.675714 1 leaderelection.go:258] "Attempting to acquire leader lease..." lock=…"
const ATTEMPT = /^(\S+) std(?:err|out) [FP] .*[Aa]ttempting to acquire leader lease/;

/** When a container's CRI log (the kubelet's file) first says it attempts to acquire a lease. */
export function firstAttemptIn(log: string): number | undefined {
  for (const line of log.split('\n')) {
    const m = ATTEMPT.exec(line);
    if (m) {
      const t = Date.parse(m[1] ?? '');
      if (Number.isFinite(t)) return t;
    }
  }
  return undefined;
}
