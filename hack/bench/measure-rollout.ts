// One measured rollout of the sample driver: deploy (or re-configure) an overlay, let it settle, restart
// the controller Deployment as `kubectl rollout restart` does, and return every lease handover with its gap
// from the old holder's SIGTERM to the new holder's acquisition, as observed by a Lease watch.
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeHttp } from '../../src/kube/http.js';
import {
  deploySample,
  localDir,
  nodeEvents,
  type SampleOverlay,
  SAMPLE_DEPLOYMENT,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE as NS,
  SAMPLE_SIDECAR_LEASES,
  SAMPLE_SNAPSHOT_CONTROLLER as SNAP,
  waitFor,
} from '../lib/cluster.js';
import { uninstallOperator } from '../lib/operator.js';
import { deploymentPath, rolloutRestart, waitLeasesHeldBy, waitRolloutComplete } from '../lib/rollout.js';
import { type Handover, handoversFrom, type LeaseObservation } from './handovers.js';
import { LeaseRecorder, sigtermTimes } from './recorder.js';
import { firstAttemptIn, type LeaseTimeline, leaseTimelines, type PodSightings } from './lease-timeline.js';
import { witnessEvidence } from '../../src/handover/witness-evidence.js';
import { Informer } from '../../src/kube/informer.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export type Overlay = SampleOverlay;

export interface RolloutResult {
  overlay: Overlay;
  replicas: number;
  startedAt: string;
  rolloutSeconds: number;
  handovers: Handover[];
  /** when every lease was held by a new pod (ms since epoch): the end of the leaderless window */
  leasesHeldAt: number;
  /** the old pods and when each was told to stop (SIGTERM), for timelines */
  stops: { pod: string; at: number }[];
  /** every Lease version seen from the trigger on, for timelines */
  observations: LeaseObservation[];
  /** per handover, where its time went (hack/bench/lease-timeline.ts) */
  timelines: LeaseTimeline[];
}

/** Work to keep flowing through the rollout (a storage probe): started before the trigger, stopped after. */
export interface DuringRollout {
  start(): Promise<void>;
  /** The rollout is over and every lease has a new holder. */
  stop(): Promise<void>;
}

const leases = Object.values(SAMPLE_LEASES);
// OpenShift timings: a settle after a scale-down or re-configuration can take a full lease expiry (137s)
// plus a poll (26–57s); give it room.
const SETTLE_MS = 8 * 60_000;

/** Deploys the overlay without csi-handover (stock behaviour) and waits until every lease has a holder. */
export async function settle(http: KubeHttp, overlay: Overlay, log: Logger): Promise<void> {
  log.info({ overlay }, 'deploying and waiting for the driver to settle');
  await uninstallOperator(http, [{ namespace: NS, deployment: SAMPLE_DEPLOYMENT }]);
  await deploySample(overlay);
  await waitSettled(http);
}

/**
 * Settled: both Deployments rolled out, every sidecar lease held by a current controller pod, and the
 * snapshot controller (its own Deployment, scaled with the overlay) leading too — or a storage probe's
 * snapshots would wait for its handover rather than csi-snapshotter's.
 */
export async function waitSettled(http: KubeHttp): Promise<V1Pod[]> {
  const pods = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, SETTLE_MS);
  await waitLeasesHeldBy(http, NS, leases, pods, SETTLE_MS);
  const snapshotControllers = await waitRolloutComplete(http, NS, SNAP.deployment, SETTLE_MS);
  await waitLeasesHeldBy(http, NS, [SNAP.lease], snapshotControllers, SETTLE_MS);
  return pods;
}

export async function measureRollout(http: KubeHttp, overlay: Overlay, log: Logger): Promise<RolloutResult> {
  await settle(http, overlay, log);
  return measureHandovers(http, overlay, log, () => rolloutRestart(http, NS, SAMPLE_DEPLOYMENT));
}

/**
 * Measures one rollout, whatever triggers it: waits until the controller Deployment has replaced every pod it had
 * and every lease is held by a new pod, then returns the handovers out of the old pods. The snapshot-controller
 * (the sixth sidecar, its own Deployment) is measured too when the trigger rolls it (labelled for the driver, a
 * log-level change): its template's generation moved.
 */
export async function measureHandovers(
  http: KubeHttp,
  overlay: Overlay,
  log: Logger,
  trigger: () => Promise<unknown>,
  during?: DuringRollout,
): Promise<RolloutResult> {
  const before = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, SETTLE_MS);
  await waitLeasesHeldBy(http, NS, leases, before, SETTLE_MS);
  const snapBefore = await waitRolloutComplete(http, NS, SNAP.deployment, SETTLE_MS);
  const snapGeneration = async () => (await http.get<V1Deployment>(deploymentPath(NS, SNAP.deployment))).metadata?.generation ?? 0;
  const snapGenerationBefore = await snapGeneration();
  const oldPods = new Set([...before, ...snapBefore].map((p) => p.metadata?.name ?? ''));
  const recorder = new LeaseRecorder(http, NS, new Set(Object.values(SAMPLE_SIDECAR_LEASES)), log);
  await recorder.start();
  const sightings = new PodWatch(http, NS, log);
  await sightings.start();
  await during?.start();
  const startedAt = new Date();
  let rolloutSeconds: number;
  let leasesHeldAt: number;
  try {
    log.info({ overlay, pods: [...oldPods] }, 'triggering the rollout');
    await trigger();
    // A Deployment's rollout done with none of the old pods left.
    const replaced = (deployment: string) =>
      waitFor(`every ${deployment} pod replaced`, SETTLE_MS, async () => {
        const pods = await waitRolloutComplete(http, NS, deployment, SETTLE_MS);
        return pods.every((p) => !oldPods.has(p.metadata?.name ?? '')) ? pods : undefined;
      });
    const after = await replaced(SAMPLE_DEPLOYMENT);
    rolloutSeconds = (Date.now() - startedAt.getTime()) / 1000;
    const snapAfter = (await snapGeneration()) > snapGenerationBefore ? await replaced(SNAP.deployment) : snapBefore;
    // Held by the current pods as the recorder saw it: a GET can see the last acquisition before the recorder's
    // watch does, and a recorder stopped then would miss that handover.
    await recorder.waitSeenHeldBy([...after, ...snapAfter], SETTLE_MS);
    leasesHeldAt = Date.now();
  } finally {
    recorder.stop();
    sightings.stop();
    await during?.stop();
  }
  const sigterms = await sigtermTimes(NS);
  const handovers = handoversFrom(recorder.observations, sigterms).filter((h) => oldPods.has(h.oldHolder));
  const stops = [...oldPods].flatMap((pod) => {
    const at = sigterms.get(pod);
    return at === undefined ? [] : [{ pod, at }];
  });
  const timelines = leaseTimelines(handovers, sidecarOf, sightings.pods, await nodeEvents(), firstAttempts(sightings.pods));
  return {
    overlay,
    replicas: before.length,
    startedAt: startedAt.toISOString(),
    rolloutSeconds,
    handovers,
    leasesHeldAt,
    stops,
    observations: recorder.observations,
    timelines,
  };
}

/** Pods of the namespace as a watch here sees them: when each was added, bound, witnessed dead, reported terminated. */
class PodWatch {
  readonly pods = new Map<string, PodSightings>();
  private readonly informer: Informer<V1Pod>;

  constructor(http: KubeHttp, namespace: string, log: Logger) {
    this.informer = new Informer<V1Pod>(http, { path: `/api/v1/namespaces/${namespace}/pods`, log });
    const seen = (p: V1Pod) => {
      const name = p.metadata?.name ?? '';
      const now = Date.now();
      const s = this.pods.get(name) ?? { name, uid: p.metadata?.uid, addedAt: this.synced ? now : undefined };
      s.node ??= p.spec?.nodeName;
      if (p.spec?.nodeName && s.boundAt === undefined && this.synced) s.boundAt = now;
      const evidence = witnessEvidence(p);
      if (s.witnessAt === undefined && evidence) {
        s.witnessAt = now;
        s.exitedBy = evidence.exitedBy;
      }
      const statuses = p.status?.containerStatuses ?? [];
      if (s.reportedAt === undefined && p.metadata?.deletionTimestamp && statuses.length && statuses.every((c) => c.state?.terminated)) s.reportedAt = now;
      this.pods.set(name, s);
    };
    this.informer.on('add', seen).on('update', seen);
  }

  private synced = false;

  async start(): Promise<void> {
    this.informer.start();
    await this.informer.waitForSync();
    this.synced = true;
  }

  stop(): void {
    this.informer.stop();
  }
}

/** Each new pod's sidecars' first attempt at their lease, from the kubelet's log files of the local nodes. */
function firstAttempts(pods: ReadonlyMap<string, PodSightings>): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  for (const p of pods.values()) {
    if (!p.node || !p.uid) continue;
    const dir = join(localDir, 'nodes', p.node, 'var-log', 'pods', `${NS}_${p.name}_${p.uid}`);
    for (const sidecar of Object.keys(SAMPLE_SIDECAR_LEASES)) {
      let log: string;
      try {
        log = readFileSync(join(dir, sidecar, '0.log'), 'utf8');
      } catch {
        continue;
      }
      const t = firstAttemptIn(log);
      if (t !== undefined) out.set(p.name, (out.get(p.name) ?? new Map<string, number>()).set(sidecar, t));
    }
  }
  return out;
}

const short = (pod: string) => pod.replace(/^csi-hostpath-controller-/, '');
const sidecarOf = (lease: string) => Object.entries(SAMPLE_SIDECAR_LEASES).find(([, l]) => l === lease)?.[0] ?? lease;

/** A plain-text table of handovers, one line per lease handover. */
export function formatHandovers(r: RolloutResult): string {
  const lines = [
    `${r.overlay} (${r.replicas} replica${r.replicas === 1 ? '' : 's'}): rollout took ${r.rolloutSeconds.toFixed(1)}s`,
    `  ${'sidecar'.padEnd(16)} ${'old holder'.padEnd(18)} ${'new holder'.padEnd(18)} ${'released'.padEnd(9)} gap (SIGTERM → acquired)`,
  ];
  for (const h of r.handovers) {
    lines.push(
      `  ${sidecarOf(h.lease).padEnd(16)} ${short(h.oldHolder).padEnd(18)} ${short(h.newHolder).padEnd(18)} ${(h.releasedAt ? 'yes' : 'no').padEnd(9)} ${h.gapMs === undefined ? 'n/a (old holder not stopped)' : `${(h.gapMs / 1000).toFixed(1)}s`}`,
    );
  }
  return lines.join('\n');
}
