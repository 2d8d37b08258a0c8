// When a new pod may start before the old leader's release. Lifting the gate never makes anything act (leader
// election still serialises), so the only risk of starting early is speed: a sidecar that tries the lease before
// the release finds it held and waits a whole retry period. What the operator observes per workload decides it:
// - death: from the first sight of an old leader's deletion to our release of its leases (per node: the kubelet
//   and the runtime report deaths there);
// - start: from letting a gated pod go after the release to the first acquisition by one of its sidecars (the
//   earliest sidecar is the one at risk).
// The new pod goes early only when the slowest recent death plus a margin is still reported before the fastest
// recent start could try; with too few observations, or after an early start that lost, it waits for the release.
import type { V1Pod } from '@kubernetes/client-node';
import { parseKubeTime } from './kube-time.js';
import { leaseCapableContainers } from './proven-dead.js';

/** Observations kept per key: a few rollouts' worth, so the model follows the nodes as they are now. */
const WINDOW = 10;
/** Observations needed (pods, not leases) before anything starts early. */
export const MIN_SAMPLES = 3;
/** Between the predicted release and the earliest predicted attempt. */
export const MARGIN_MS = 300;
/**
 * An early start that acquired its lease this long after both being let go and the release lost the race: a
 * first attempt that finds the lease free takes one pod start (seconds); one that finds it held waits for its
 * next retry (26s apart on OpenShift; upstream's 5s goes unnoticed and costs little). From the later of the two:
 * a pod let go for one old leader can take another's lease long after, right on that one's release.
 */
export const LOST_AFTER_MS = 8_000;

export interface OverlapPrediction {
  /** slowest recent death → release, ms */
  deathMs: number;
  /** fastest recent let-go → first acquisition, ms */
  startMs: number;
}

class Samples {
  private readonly byKey = new Map<string, { id: string; ms: number }[]>();

  /** One value per id (a pod): a later one for the same id keeps the smaller (`min`) or larger (`max`). */
  add(key: string, id: string, ms: number, keep: 'min' | 'max'): void {
    const list = this.byKey.get(key) ?? [];
    const same = list.find((s) => s.id === id);
    if (same) same.ms = keep === 'min' ? Math.min(same.ms, ms) : Math.max(same.ms, ms);
    else list.push({ id, ms });
    while (list.length > WINDOW) list.shift();
    this.byKey.set(key, list);
  }

  values(key: string): number[] {
    return (this.byKey.get(key) ?? []).map((s) => s.ms);
  }

  clear(key: string): void {
    this.byKey.delete(key);
  }
}

export class OverlapModel {
  private readonly deaths = new Samples();
  private readonly starts = new Samples();

  /** An old leader (pod `id`) of `workload` on `node` was released `ms` after its deletion was first seen. */
  death(workload: string, node: string, id: string, ms: number): void {
    this.deaths.add(`${workload}\n${node}`, id, ms, 'max');
    this.deaths.add(`${workload}\n*`, id, ms, 'max');
  }

  /** A pod (`id`) let go after the release acquired a lease `ms` later; its earliest sidecar is what counts. */
  start(workload: string, id: string, ms: number): void {
    this.starts.add(workload, id, ms, 'min');
  }

  /** A pod let go early lost the race: the workload waits for releases again until it has learned anew. */
  lost(workload: string): void {
    this.starts.clear(workload);
  }

  predict(workload: string, node: string | undefined): OverlapPrediction | undefined {
    const onNode = node ? this.deaths.values(`${workload}\n${node}`) : [];
    const deaths = onNode.length >= MIN_SAMPLES ? onNode : this.deaths.values(`${workload}\n*`);
    const starts = this.starts.values(workload);
    if (deaths.length < MIN_SAMPLES || starts.length < MIN_SAMPLES) return undefined;
    return { deathMs: Math.max(...deaths), startMs: Math.min(...starts) };
  }
}

/** The earliest moment a new pod may be let go for a holder whose deletion was first seen at `stopSeenAt`. */
export function earlyLiftAt(p: OverlapPrediction, stopSeenAt: number): number {
  return stopSeenAt + p.deathMs + MARGIN_MS - p.startMs;
}

/** A pod being let go: its gate lifted, or admitted ungated while a handover was pending; `early`: before the release. */
export interface LetGo {
  at: number;
  early: boolean;
}

/**
 * By when every container of the pod that may hold a lease had started, as its kubelet has reported so far: the
 * last `startedAt` plus the second it is rounded down to. Undefined while one has not been reported started.
 */
export function containersStartedBy(pod: V1Pod): number | undefined {
  let last = -Infinity;
  for (const c of leaseCapableContainers(pod)) {
    const state = c.status?.state;
    const started = parseKubeTime(state?.running?.startedAt ?? state?.terminated?.startedAt);
    if (started === undefined) return undefined;
    last = Math.max(last, started + 1_000);
  }
  return Number.isFinite(last) ? last : undefined;
}

/** The lift after a release can reach us a little before the Lease event of that release. */
const RELEASE_ORDER_SLACK_MS = 100;

/**
 * What one handover teaches: how long the old leader took from its deletion to our release (`death`); for a
 * pod let go after the release, how long it took to its first acquisition (`start`: it found the lease free);
 * for a pod let go early, whether it lost the race (`lost`). Only our own releases teach anything.
 * `startedBy`: by when the new pod's containers had all started (containersStartedBy; the acquisition itself when
 * the kubelet had not reported them all yet). A sidecar tries the lease once its container runs, so on a busy node
 * a pod whose last container started seconds after the release did not lose a race: it started late.
 */
export function lessonOf(
  h: { releasedBy: string; releasedAt?: number; stopAt?: number; acquiredAt: number },
  letGo: LetGo | undefined,
  startedBy?: number,
): { death?: number; start?: number; lost?: boolean } {
  if (h.releasedBy !== 'operator' || h.releasedAt === undefined) return {};
  const death = h.stopAt === undefined ? undefined : h.releasedAt - h.stopAt;
  if (!letGo) return { death };
  if (!letGo.early) return letGo.at >= h.releasedAt - RELEASE_ORDER_SLACK_MS ? { death, start: h.acquiredAt - letGo.at } : { death };
  return { death, lost: h.acquiredAt - Math.max(letGo.at, h.releasedAt, startedBy ?? -Infinity) > LOST_AFTER_MS };
}

/** After a pod started before the release lost the race, its workload's new pods wait for releases this long. */
export const LOST_BACKOFF_MS = 10 * 60_000;

/**
 * Where the node witness runs on the old leader's node, a new pod may start at once: the witness's evidence
 * releases the lease a few hundred milliseconds after the leader's last exit (0.3–0.9 s after its SIGTERM
 * through a rollout on busy nodes), before a pod admitted now first tries it (1.5–3 s: docs/benchmarks.md), as
 * the sidecars' own release on exit lets it. Not after a pod of the workload started that way lost the
 * race lately (a leader slow to die), nor where no witness runs: undefined, wait for the release.
 */
export function witnessLiftAt(node: string | undefined, witnessed: ReadonlySet<string>, lastLostAt: number | undefined, now: number): number | undefined {
  if (node === undefined || !witnessed.has(node)) return undefined;
  if (lastLostAt !== undefined && now - lastLostAt < LOST_BACKOFF_MS) return undefined;
  return now;
}
