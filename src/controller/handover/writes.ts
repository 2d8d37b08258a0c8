// The handover engine's writes: lease releases and pod patches (deletion cost, held-back state, gate lifts),
// each made on the version a plan was decided on, with one answer to every refusal (src/kube/errors.ts
// refusalOf): gone or changed meanwhile (for a pod patch, a failed test op: 422), the next event decides again;
// forbidden, not retried (the lease expires as it would without csi-handover, and the ClusterCSIDriver says which
// RoleBinding is missing); anything else is retried with backoff.
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { RELEASED_BY_OPERATOR } from '../../api/names.js';
import type { Clock } from '../../clock.js';
import { alreadyDone, type LeasePlan, type PodAction } from '../../handover/plan.js';
import { releaseRecord } from '../../handover/release.js';
import type { WriteAccess } from '../../kube/access.js';
import type { EventRecorder } from '../../kube/events.js';
import { type KubeHttp, PatchType } from '../../kube/http.js';
import { refusalOf } from '../../kube/errors.js';
import { keyOf } from '../../kube/informer.js';
import type { ReconcileResult } from '../../kube/workqueue.js';
import { WrittenOver } from '../../kube/written-over.js';
import type { Metrics } from '../../metrics.js';

/** How long a version we wrote over is taken as out of date before the watch brings its successor. */
const WRITTEN_OVER_TRUST_MS = 5000;

export type Release = Extract<LeasePlan, { action: 'release' }>;

const leaseWritten = (lease: V1Lease): string => `lease/${keyOf(lease)}`;
const podWritten = (pod: V1Pod): string => `pod/${pod.metadata?.uid ?? keyOf(pod)}`;

export class HandoverWrites {
  /** Versions of leases and pods our writes replaced, while the cache still has them. */
  private readonly writtenOver: WrittenOver;

  constructor(
    private readonly d: {
      http: KubeHttp;
      metrics: Metrics;
      events: EventRecorder;
      /** Told of a refused write, so the next check asks again (undefined: not asked). */
      access?: WriteAccess;
      /** The pod as the cache holds it now. */
      cachedPod: (key: string) => V1Pod | undefined;
      now: Clock;
    },
  ) {
    this.writtenOver = new WrittenOver(WRITTEN_OVER_TRUST_MS, d.now);
  }

  /** A new version of the lease or pod arrived (or it is gone): what we wrote is in the cache now. */
  seen(o: { lease: V1Lease } | { pod: V1Pod }): void {
    this.writtenOver.forget('lease' in o ? leaseWritten(o.lease) : podWritten(o.pod));
  }

  /**
   * The client-go release record, written on the cached version the plan was decided on, with its resourceVersion
   * as the precondition: if the Lease changed since (a renewal, a new holder, another release), the API server
   * refuses (409) and the next version decides again. A fresh GET first would buy no safety the precondition does
   * not give (it re-reads the Lease, not the holder's pod, which is the evidence): docs/safety.md.
   */
  async release(lease: V1Lease, plan: Release, log: Logger): Promise<{ released: boolean } & Exclude<ReconcileResult, void>> {
    const rv = lease.metadata?.resourceVersion;
    const written = leaseWritten(lease);
    // A version we already wrote over is out of date: its successor is on its way in the watch.
    if (!lease.spec || this.writtenOver.has(written, rv, 'release')) return { released: false };
    const spec = releaseRecord(lease.spec, this.d.now());
    // Marked, so every replica (and the next leader) can tell our release from the holder's own.
    const metadata = {
      ...lease.metadata,
      managedFields: undefined,
      annotations: { ...lease.metadata?.annotations, [RELEASED_BY_OPERATOR]: String(spec.renewTime) },
    };
    const path = `/apis/coordination.k8s.io/v1/namespaces/${lease.metadata?.namespace}/leases/${lease.metadata?.name}`;
    try {
      await this.d.http.request('PUT', path, { body: { ...lease, metadata, spec } });
    } catch (err) {
      const refusal = refusalOf(err);
      if (refusal === undefined || refusal === 'invalid') throw err;
      if (refusal === 'gone') return { released: false };
      this.writtenOver.note(written, rv, 'release');
      if (refusal === 'forbidden') {
        this.d.access?.forget(lease.metadata?.namespace ?? '');
        log.warn({ holder: plan.holder, err: String(err) }, 'may not release this lease (403): it will expire');
        return { released: false };
      }
      this.d.metrics.releaseConflicts.inc();
      log.info({ holder: plan.holder }, 'lease changed before the release write (409): deciding again');
      return { released: false, requeueAfterMs: WRITTEN_OVER_TRUST_MS };
    }
    this.writtenOver.note(written, rv, 'release');
    this.d.metrics.releases.inc({ released_by: 'operator' });
    this.d.metrics.releaseEvidence.inc({ evidence: plan.evidence });
    log.info({ holder: plan.holder, pod: plan.pod, evidence: plan.evidence }, 'released the lease of a dead holder');
    return { released: true };
  }

  /** Best effort, each on its own: how many pods were patched. */
  async carryOutAll(actions: readonly PodAction[], log: Logger): Promise<number> {
    let done = 0;
    for (const a of actions) if (await this.carryOut(a, log).catch(() => false)) done++;
    return done;
  }

  /** Whether the pod was patched (false: already done, gone or changed meanwhile, or not allowed). */
  async carryOut(a: PodAction, log: Logger): Promise<boolean> {
    const what =
      a.kind === 'set-deletion-cost'
        ? 'set pod-deletion-cost'
        : a.kind === 'hold'
          ? 'holding the new pod back until the handover'
          : `lifted the handover gate (${a.reason})`;
    // Decided again on the version this very patch was written over (another event came before its echo): done.
    const written = podWritten(a.pod);
    const patch = JSON.stringify(a.patch);
    if (this.writtenOver.has(written, a.pod.metadata?.resourceVersion, patch)) return false;
    // Or already in place on the version the cache holds now (the echo of an earlier write came meanwhile).
    if (alreadyDone(a, this.d.cachedPod(keyOf(a.pod)))) return false;
    const m = a.pod.metadata;
    try {
      await this.d.http.patch(`/api/v1/namespaces/${m?.namespace}/pods/${m?.name}`, a.patch, a.kind === 'lift' ? PatchType.json : PatchType.merge);
    } catch (err) {
      const refusal = refusalOf(err);
      if (refusal === undefined) throw err;
      if (refusal === 'forbidden') {
        this.d.access?.forget(m?.namespace ?? '');
        log.warn({ pod: m?.name, err: String(err) }, `may not patch this pod (403): not done: ${what}`);
      }
      return false;
    }
    log.info({ pod: m?.name }, what);
    this.writtenOver.note(written, m?.resourceVersion, patch);
    if (a.kind !== 'lift') return true;
    this.d.metrics.gatesLifted.inc({ reason: a.reason });
    if (a.warning) {
      await this.d.events.emit(
        { apiVersion: 'v1', kind: 'Pod', name: m?.name ?? '', namespace: m?.namespace, uid: m?.uid },
        'Warning',
        a.warning.reason,
        a.warning.message,
      );
    }
    return true;
  }
}
