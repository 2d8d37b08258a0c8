// What the handover engine tells: every leadership term change measured (HandoverTracker) and reported in the
// driver's CR (through its HandoverReports), as one Event per batch of handovers, and as metrics; refusals
// counted once per holder and reason. Every replica measures; only the leader counts and tells.
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { type HandoverRecord, HandoverTracker, type LeaseKey } from '../../handover/measure.js';
import type { ObservedPod } from '../../handover/observed-pod.js';
import { handoverOwner, type LeasePlan, observeLease } from '../../handover/plan.js';
import { handoversMessage, type HandoverReports } from '../../handover/report.js';
import type { HandoverSnapshot } from '../../handover/snapshot.js';
import { Batcher } from '../../kube/batcher.js';
import type { EventRecorder } from '../../kube/events.js';
import { keyOf } from '../../kube/informer.js';
import type { Metrics } from '../../metrics.js';
import type { ObservedWorld } from './world.js';

/** The Events of a driver's handovers are gathered until none came for half a second (at most 3 s). */
const EVENT_BATCH = { quietMs: 500, maxMs: 3000 };

export const leaseKeyOf = (l: V1Lease): LeaseKey => ({ namespace: l.metadata?.namespace ?? '', name: l.metadata?.name ?? '' });

export class HandoverReporting {
  private readonly tracker = new HandoverTracker();
  /** lease key → the refusal (holder and reason) counted for it: one per lease, replaced when the holder or reason changes */
  private readonly refusalsCounted = new Map<string, string>();
  /** Handovers to tell as Events, gathered per driver (a rollout moves several leases within a second). */
  private readonly told: Batcher<HandoverRecord>;
  private readonly telling = new Set<Promise<void>>();
  private active = false;

  constructor(
    private readonly d: {
      log: Logger;
      metrics: Metrics;
      events: EventRecorder;
      reports: HandoverReports;
      /** A driver's handover report changed: its status needs an apply. */
      onReportChanged: (driver: string) => void;
      world: ObservedWorld;
      now: Clock;
    },
  ) {
    this.told = new Batcher<HandoverRecord>(EVENT_BATCH, (driver, told) => this.tell(driver, told), d.now);
  }

  start(): void {
    this.active = true;
    for (const driver of this.d.reports.startLeading()) this.d.onReportChanged(driver);
  }

  async stop(): Promise<void> {
    this.active = false;
    this.told.flush();
    await Promise.all(this.telling);
    this.d.reports.stopLeading();
  }

  /** A pod seen with a deletionTimestamp: when it was told to stop (deletion time minus its grace period). */
  podStopping(pod: V1Pod, o: ObservedPod): void {
    const deletion = Date.parse(String(pod.metadata?.deletionTimestamp));
    const grace = o.gracefulDeletionSeconds ?? pod.metadata?.deletionGracePeriodSeconds ?? 0;
    this.tracker.podStopping(pod.metadata?.uid ?? keyOf(pod), this.d.now(), Number.isNaN(deletion) ? undefined : deletion - grace * 1000);
  }

  /** When the pod's deletion was first seen, if it was. */
  stopSeenAt(uid: string): number | undefined {
    return this.tracker.stopSeenAt(uid);
  }

  /** Forget what is older than `cutoff` and no lease needs (bounded memory). */
  prune(cutoff: number): void {
    this.tracker.prune(cutoff);
  }

  /** A version of a lease: its holder now and, when a new term began, the handover that ended the last one. */
  leaseSeen(lease: V1Lease, s: HandoverSnapshot): { holder: string; handover?: HandoverRecord } {
    const key = leaseKeyOf(lease);
    const term = this.tracker.term(key);
    const observation = observeLease(s, lease, term && { holder: term.holder, pod: term.pod === undefined ? undefined : this.d.world.pod(term.pod) });
    return { holder: observation.holder, handover: this.tracker.observe(key, observation, s.now) };
  }

  leaseGone(lease: V1Lease): void {
    this.refusalsCounted.delete(keyOf(lease));
    this.tracker.forget(leaseKeyOf(lease));
  }

  /** A pending handover not released: counted once per holder and reason (it is decided again on every event). */
  refused(lease: V1Lease, plan: Extract<LeasePlan, { action: 'refuse' }>, log: Logger): void {
    const id = keyOf(lease);
    const refusal = `${plan.holder}|${plan.reason}`;
    if (this.refusalsCounted.get(id) === refusal) return;
    this.refusalsCounted.set(id, refusal);
    this.d.metrics.refusedReleases.inc({ reason: plan.reason });
    log.info({ holder: plan.holder, reason: plan.reason, message: plan.message }, 'not releasing this lease');
  }

  report(h: HandoverRecord, s: HandoverSnapshot): void {
    const driver = handoverOwner(s, h);
    if (!driver) return; // not a lease of a managed workload
    if (this.d.reports.add(driver, h)) this.d.onReportChanged(driver);
    this.d.log.info(
      { lease: `${h.namespace}/${h.lease}`, oldHolder: h.oldHolder, newHolder: h.newHolder, gapMs: h.gapMs, releasedBy: h.releasedBy, driver },
      'lease handed over',
    );
    // A new leader adds what the old one did not report; only the leader counts and tells.
    if (!this.active) return;
    if (h.gapMs !== undefined) this.d.metrics.handoverGap.observe({ namespace: h.namespace, lease: h.lease, released_by: h.releasedBy }, h.gapMs / 1000);
    if (h.releasedBy !== 'operator') this.d.metrics.releases.inc({ released_by: h.releasedBy });
    this.told.add(driver, h);
  }

  /** One Event on the driver's CR for the handovers it saw together, naming each lease's old and new holder. */
  private tell(driver: string, told: HandoverRecord[]): void {
    const sent = this.d.events.emit(
      { apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', name: driver },
      'Normal',
      'LeaseHandedOver',
      handoversMessage(told),
    );
    this.telling.add(sent);
    void sent.finally(() => this.telling.delete(sent));
  }
}
