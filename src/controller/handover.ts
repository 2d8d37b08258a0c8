// The handover engine's I/O: keeps the observed pods, lease holders and nodes from the informers' events,
// routes each change to the keys it concerns (a lease, a workload), and carries out the plans that
// src/handover/plan.ts decides over one snapshot. It also measures every leadership term change and reports it.
import type { V1Deployment, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { HANDOVER_STATE, RELEASED_BY_OPERATOR } from '../api/names.js';
import type { Clock } from '../clock.js';
import { readinessChanged } from '../handover/cached.js';
import { hasHandoverGate, liftGatePatch } from '../handover/gate.js';
import { podIdentity } from '../handover/holder.js';
import { LeaseHolderIndex } from '../handover/lease-holder-index.js';
import { type HandoverRecord, HandoverTracker, type LeaseKey } from '../handover/measure.js';
import { isTerminating, type ObservedPod, observePod, observePodGone, podRef } from '../handover/observed-pod.js';
import { ObservedPods } from '../handover/observed-pods.js';
import { type AdmissionPlan, alreadyDone, type EarlyLift, handoverOwner, OVERLAP_STATE_PREFIX, heldLeases, type LeasePlan, observeLease, type PodAction, planAdmission, planLease, planOrphanGate, planWorkload } from '../handover/plan.js';
import { earlyLiftAt, type LetGo, lessonOf, OverlapModel } from '../handover/overlap.js';
import { releaseRecord } from '../handover/release.js';
import { handoversMessage, type HandoverReports } from '../handover/report.js';
import { HandoverSnapshot, workloadRef } from '../handover/snapshot.js';
import { Batcher } from '../kube/batcher.js';
import type { EventRecorder } from '../kube/events.js';
import { POD_PATCH, type WriteAccess } from '../kube/access.js';
import { isConflict, isForbidden, isNotFound, type KubeHttp, PatchType } from '../kube/http.js';
import { type InformerView, keyOf } from '../kube/informer.js';
import { WorkQueue } from '../kube/workqueue.js';
import { WrittenOver } from '../kube/written-over.js';
import { gatePatch, statePatch } from '../webhook/admission.js';
import type { Metrics } from '../metrics.js';

export interface HandoverDeps {
  http: KubeHttp;
  log: Logger;
  metrics: Metrics;
  events: EventRecorder;
  leases: InformerView<V1Lease>;
  pods: InformerView<V1Pod>;
  nodes: InformerView<V1Node>;
  /** Managed controller Deployments (labelled with the driver label). */
  deployments: () => V1Deployment[];
  gateTimeoutMs: number;
  /** Let new pods go before the release where the overlap model predicts it safe (otherwise it only learns). */
  earlyStart: boolean;
  reports: HandoverReports;
  /** A driver's handover report changed: its status needs an apply. */
  onReportChanged: (driver: string) => void;
  /** Whether the operator may patch pods where it would gate one (undefined: not asked). */
  access?: WriteAccess;
  now: Clock;
}

const TOMBSTONE_TTL_MS = 10 * 60_000;
/** The Events of a driver's handovers are gathered until none came for half a second (at most 3 s). */
const EVENT_BATCH = { quietMs: 500, maxMs: 3000 };
/** How long a version we wrote over is taken as out of date before the watch brings its successor. */
const WRITTEN_OVER_TRUST_MS = 5000;
const PATCHES = { gate: gatePatch, state: statePatch };
const leaseKeyOf = (l: V1Lease): LeaseKey => ({ namespace: l.metadata?.namespace ?? '', name: l.metadata?.name ?? '' });

export class HandoverController {
  private readonly observed = new ObservedPods();
  private readonly leaseHolders = new LeaseHolderIndex();
  private readonly nodes = new Map<string, V1Node>();
  private readonly tracker = new HandoverTracker();
  /** lease key → the refusal (holder and reason) counted for it: one per lease, replaced when the holder or reason changes */
  private readonly refusalsCounted = new Map<string, string>();
  /** Versions of leases and pods our writes replaced, while the cache still has them. */
  private readonly writtenOver: WrittenOver;
  /** When to start new pods before the release (src/handover/overlap.ts), learned from what every replica observes. */
  private readonly overlap = new OverlapModel();
  /** pod uid → when it was let go (its gate lifted, or first seen ungated while a handover was pending) and whether before the release */
  private readonly letGo = new Map<string, LetGo>();
  readonly queue: WorkQueue;
  /** Handovers to tell as Events, gathered per driver (a rollout moves several leases within a second). */
  private readonly told: Batcher<HandoverRecord>;
  private readonly telling = new Set<Promise<void>>();
  private active = false;

  constructor(private readonly d: HandoverDeps) {
    this.writtenOver = new WrittenOver(WRITTEN_OVER_TRUST_MS, d.now);
    this.told = new Batcher<HandoverRecord>(EVENT_BATCH, (driver, told) => this.tell(driver, told), d.now);
    this.queue = new WorkQueue({
      name: 'handover',
      concurrency: 4,
      backoff: { baseMs: 100, maxMs: 10_000 },
      reconcile: (key) => this.reconcile(key),
      onError: (key, err, retryInMs) => {
        d.metrics.reconcileErrors.inc({ controller: 'handover' });
        d.log.warn({ key, err: String(err), retryInMs }, 'handover reconcile failed; retrying with backoff');
      },
      onDone: (_k, _ms, outcome) => d.metrics.reconciles.inc({ controller: 'handover', outcome }),
    });
    for (const l of d.leases.list()) this.leaseHolders.set(l);
    for (const n of d.nodes.list()) this.nodes.set(n.metadata?.name ?? '', n);
    d.pods.on('add', (p) => this.podSeen(p)).on('update', (p) => this.podSeen(p)).on('delete', (p) => this.podGone(p));
    d.leases.on('add', (l) => this.leaseSeen(l)).on('update', (l, old) => this.leaseSeen(l, old)).on('delete', (l) => this.leaseGone(l));
    d.nodes
      .on('add', (n) => this.nodes.set(n.metadata?.name ?? '', n))
      .on('update', (n, old) => {
        this.nodes.set(n.metadata?.name ?? '', n);
        // Heartbeats change nothing a decision reads; a change of readiness concerns every pod on the node.
        if (readinessChanged(n, old)) for (const o of this.observed.onNode(n.metadata?.name)) this.podChanged(o.pod);
      })
      .on('delete', (n) => this.nodes.delete(n.metadata?.name ?? ''));
  }

  /** Only the leader acts; every replica observes, so a new leader starts with warm state. */
  start(): void {
    this.active = true;
    for (const driver of this.d.reports.startLeading()) this.d.onReportChanged(driver);
    this.queue.start();
    for (const l of this.d.leases.list()) this.enqueue(`lease/${keyOf(l)}`);
    for (const dep of this.d.deployments()) this.enqueue(`workload/${workloadRef(dep)}`);
  }

  /** Stops acting (a shutdown, or a lost leadership after which start() may come again); observing goes on. */
  async stop(): Promise<void> {
    this.active = false;
    await this.queue.shutDown();
    this.told.flush();
    await Promise.all(this.telling);
    this.d.reports.stopLeading();
  }

  /** `fresh`: pods re-read from the API just now (by uid; `gone` when the read found none), over what was observed. */
  private snapshot(fresh?: ReadonlyMap<string, ObservedPod>): HandoverSnapshot {
    return new HandoverSnapshot({
      deployments: this.d.deployments,
      podsIn: fresh ? (ns) => this.observed.inNamespace(ns).map((o) => fresh.get(o.pod.metadata?.uid ?? '') ?? o) : (ns) => this.observed.inNamespace(ns),
      leasesIn: (ns) => this.leaseHolders.inNamespace(ns).flatMap((name) => this.d.leases.get(`${ns}/${name}`) ?? []),
      nodes: this.nodes,
    }, this.d.now());
  }

  private enqueue(key: string): void {
    if (this.active) this.queue.add(key);
  }

  /** The earliest moment a new pod of `dep` may start while `holder` is being stopped (undefined: wait for the release). */
  private earlyLift(s: HandoverSnapshot): EarlyLift | undefined {
    if (!this.d.earlyStart) return undefined;
    return (holder) => {
      const dep = s.workloadOf(holder.pod);
      const p = dep && this.overlap.predict(workloadRef(dep), holder.pod.spec?.nodeName);
      if (!p) return undefined;
      // Not seen stopping yet (the admission of its replacement can come first): it is being stopped now.
      return earlyLiftAt(p, this.tracker.stopSeenAt(holder.pod.metadata?.uid ?? '') ?? s.now);
    };
  }

  // ---- admission: whether a new pod waits behind the gate ----

  /**
   * Decided over the holders as the API has them now: the replacement pod is created milliseconds after the old
   * leader's deletion, which the informer may not have delivered yet. Each holder of the workload's leases is
   * read again (usually one pod: the leader holds every lease) unless the cache already shows it being stopped:
   * what matters is whether a handover is pending, and a read could only add that it died meanwhile, which the
   * release right after tells anyway. A failed read keeps what was observed.
   */
  async admit(pod: V1Pod, signal: AbortSignal): Promise<AdmissionPlan> {
    const cached = this.snapshot();
    const dep = cached.workloadOf(pod);
    if (!dep) return planAdmission(cached, pod, PATCHES);
    const holders = new Map(heldLeases(cached, dep).map(({ holder }) => [holder.pod.metadata?.uid ?? '', holder]));
    const fresh = new Map<string, ObservedPod>();
    await Promise.all([...holders].map(async ([uid, o]) => {
      if (o.gone || isTerminating(o)) return;
      const m = o.pod.metadata;
      try {
        const now = await this.d.http.request<V1Pod>('GET', `/api/v1/namespaces/${m?.namespace}/pods/${m?.name}`, { signal });
        fresh.set(uid, now.metadata?.uid === uid ? observePod(o, now) : observePodGone(o, o.pod, this.d.now()));
      } catch (err) {
        if (isNotFound(err)) fresh.set(uid, observePodGone(o, o.pod, this.d.now()));
        else this.d.log.debug({ pod: podRef(o.pod), err: String(err) }, 'admission: re-reading a holder failed; deciding on what was observed');
      }
    }));
    const s = this.snapshot(fresh);
    const plan = planAdmission(s, pod, PATCHES, this.earlyLift(s));
    // A gate this operator could not lift (no RoleBinding to csi-handover-driver there) would strand the pod: fail open.
    const ns = pod.metadata?.namespace ?? '';
    if (plan.gate && this.d.access && (await this.d.access.denied(ns, [POD_PATCH])).length) {
      return { gate: false, reason: 'no-write-access', message: `csi-handover may not patch pods in namespace ${ns}: not gated, as it could not lift the gate` };
    }
    return plan;
  }

  /**
   * Fail open when the operator goes away for good (uninstalled, scaled to zero): every pod still behind our gate
   * is let go, so none waits for an operator that will not come back. Best effort; each lift is test-and-remove.
   */
  async liftAllGates(why: string): Promise<number> {
    let lifted = 0;
    for (const pod of this.d.pods.list()) {
      const patch = hasHandoverGate(pod) && !pod.metadata?.deletionTimestamp ? liftGatePatch(pod) : undefined;
      if (!patch) continue;
      const action: PodAction = { kind: 'lift', pod, reason: 'operator-leaving', message: why, patch };
      if (await this.carryOut(action, this.d.log).catch(() => false)) lifted++;
    }
    return lifted;
  }

  // ---- routing: which keys an observed change concerns ----

  private podSeen(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? keyOf(pod);
    const previous = this.observed.get(uid);
    // Let go: our gate gone since the last sight, or a first sight of a pod admitted ungated mid-handover.
    const early = pod.metadata?.annotations?.[HANDOVER_STATE]?.startsWith(OVERLAP_STATE_PREFIX) === true;
    if (!hasHandoverGate(pod) && !this.letGo.has(uid) && (previous ? hasHandoverGate(previous.pod) : early)) this.letGo.set(uid, { at: this.d.now(), early });
    const o = observePod(previous, pod);
    this.observed.set(uid, o);
    this.writtenOver.forget(`pod/${uid}`);
    if (pod.metadata?.deletionTimestamp) {
      const deletion = Date.parse(String(pod.metadata.deletionTimestamp));
      const grace = o.gracefulDeletionSeconds ?? pod.metadata.deletionGracePeriodSeconds ?? 0;
      this.tracker.podStopping(uid, this.d.now(), Number.isNaN(deletion) ? undefined : deletion - grace * 1000);
    }
    this.podChanged(pod);
  }

  private podGone(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? keyOf(pod);
    this.observed.set(uid, observePodGone(this.observed.get(uid), pod, this.d.now()));
    this.writtenOver.forget(`pod/${uid}`);
    this.podChanged(pod);
    const cutoff = this.d.now() - TOMBSTONE_TTL_MS;
    this.observed.dropGoneBefore(cutoff);
    this.tracker.prune(cutoff);
    for (const [id, l] of this.letGo) if (l.at < cutoff) this.letGo.delete(id);
  }

  /** The leases the pod may hold (`<identity>` or `<identity>_<suffix>`, where its workload elects) and its workload. */
  private podChanged(pod: V1Pod): void {
    const s = this.snapshot();
    const dep = s.workloadOf(pod);
    const identity = podIdentity(pod);
    if (identity) {
      for (const ns of dep ? s.leaseNamespacesOf(dep) : [pod.metadata?.namespace ?? '']) {
        for (const name of this.leaseHolders.heldBy(ns, identity)) this.enqueue(`lease/${ns}/${name}`);
      }
    }
    if (dep) this.enqueue(`workload/${workloadRef(dep)}`);
    else if (hasHandoverGate(pod) && !pod.metadata?.deletionTimestamp) this.enqueue(`orphan-gate/${keyOf(pod)}`);
  }

  private leaseSeen(lease: V1Lease, old?: V1Lease): void {
    this.leaseHolders.set(lease);
    this.writtenOver.forget(`lease/${keyOf(lease)}`);
    const key = leaseKeyOf(lease);
    const s = this.snapshot();
    const term = this.tracker.term(key);
    const observation = observeLease(s, lease, term && { holder: term.holder, pod: term.pod === undefined ? undefined : this.observed.get(term.pod) });
    const record = this.tracker.observe(key, observation, s.now);
    if (record) this.reportHandover(record, s);
    this.enqueue(`lease/${key.namespace}/${key.name}`);
    // Leadership moved: the new holder's workload re-checks deletion costs and gates. Renewals skip this.
    const holder = observation.holder;
    if (holder && holder !== old?.spec?.holderIdentity) {
      const r = s.resolve({ namespace: key.namespace, identity: holder });
      const dep = r.kind === 'pod' ? s.workloadOf(r.pod.pod) : undefined;
      if (dep) this.enqueue(`workload/${workloadRef(dep)}`);
    }
  }

  private leaseGone(lease: V1Lease): void {
    this.leaseHolders.delete(lease);
    this.writtenOver.forget(`lease/${keyOf(lease)}`);
    this.refusalsCounted.delete(keyOf(lease));
    this.tracker.forget(leaseKeyOf(lease));
  }

  // ---- carrying out plans ----

  private async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const [kind, ns, name] = key.split('/');
    if (!ns || !name) return;
    const s = this.snapshot();
    if (kind === 'lease') {
      const lease = this.d.leases.get(`${ns}/${name}`);
      return lease && this.carryOutLease(s, lease, planLease(s, lease, s.now));
    }
    if (kind === 'workload') {
      const dep = s.deployment(ns, name);
      if (!dep) return;
      const plan = planWorkload(s, dep, s.now, this.d.gateTimeoutMs, this.earlyLift(s));
      const log = this.d.log.child({ workload: key.slice('workload/'.length) });
      for (const action of plan.actions) await this.carryOut(action, log);
      return plan.requeueAfterMs === undefined ? undefined : { requeueAfterMs: plan.requeueAfterMs };
    }
    if (kind === 'orphan-gate') {
      const pod = this.d.pods.get(`${ns}/${name}`);
      const action = pod && planOrphanGate(s, pod);
      if (action) await this.carryOut(action, this.d.log.child({ pod: `${ns}/${name}` }));
    }
  }

  private async carryOutLease(s: HandoverSnapshot, lease: V1Lease, plan: LeasePlan): Promise<{ requeueAfterMs?: number } | void> {
    const key = leaseKeyOf(lease);
    const id = keyOf(lease);
    const log = this.d.log.child({ lease: id });
    if (plan.action === 'refuse') {
      // Counted once per holder and reason: the same refusal is re-decided on every event until the lease expires.
      const refusal = `${plan.holder}|${plan.reason}`;
      if (this.refusalsCounted.get(id) === refusal) return;
      this.refusalsCounted.set(id, refusal);
      this.d.metrics.refusedReleases.inc({ reason: plan.reason });
      log.info({ holder: plan.holder, reason: plan.reason, message: plan.message }, 'not releasing this lease');
      return;
    }
    if (plan.action !== 'release' || !lease.spec) return;
    // A version we already wrote over (released, or refused with 409) is out of date: its successor is on its way
    // in the watch, and a write on it could only fail.
    const rv = lease.metadata?.resourceVersion;
    const written = `lease/${id}`;
    if (this.writtenOver.has(written, rv, 'release')) return;
    // Written on the cached version the plan was decided on, with its resourceVersion as the precondition: if
    // the Lease changed since (a renewal, a new holder, another release), the API server refuses (409) and the
    // next event decides again. A fresh GET first would buy no safety the precondition does not give (it
    // re-reads the Lease, not the holder's pod, which is the evidence): docs/safety.md.
    const path = `/apis/coordination.k8s.io/v1/namespaces/${key.namespace}/leases/${key.name}`;
    const spec = releaseRecord(lease.spec, this.d.now());
    // Marked, so every replica (and the next leader) can tell our release from the holder's own.
    const metadata = { ...lease.metadata, managedFields: undefined, annotations: { ...lease.metadata?.annotations, [RELEASED_BY_OPERATOR]: String(spec.renewTime) } };
    try {
      await this.d.http.request('PUT', path, { body: { ...lease, metadata, spec } });
      this.writtenOver.note(written, rv, 'release');
    } catch (err) {
      if (isNotFound(err)) return;
      if (isForbidden(err)) {
        // No RoleBinding to csi-handover-driver in this namespace (the ClusterCSIDriver says so): not retried;
        // the lease expires as it would without csi-handover.
        this.writtenOver.note(written, rv, 'release');
        this.d.access?.forget(lease.metadata?.namespace ?? '');
        log.warn({ holder: plan.holder, err: String(err) }, 'may not release this lease (403): it will expire');
        return;
      }
      if (!isConflict(err)) throw err;
      // Someone else moved (a renewal, a candidate): decide again on the next version the watch brings.
      this.writtenOver.note(written, rv, 'release');
      this.d.metrics.releaseConflicts.inc();
      log.info({ holder: plan.holder }, 'lease changed before the release write (409): deciding again');
      return { requeueAfterMs: WRITTEN_OVER_TRUST_MS };
    }
    this.d.metrics.releases.inc({ released_by: 'operator' });
    log.info({ holder: plan.holder, pod: plan.pod, evidence: plan.evidence }, 'released the lease of a dead holder');
    if (plan.recheck) this.enqueue(`workload/${plan.recheck}`);
  }

  /** Whether the pod was patched (false: gone or changed meanwhile). */
  private async carryOut(a: PodAction, log: Logger): Promise<boolean> {
    const what = a.kind === 'set-deletion-cost' ? 'set pod-deletion-cost' : a.kind === 'hold' ? 'holding the new pod back until the handover' : `lifted the handover gate (${a.reason})`;
    // Decided again on the version this very patch was written over (another event came before its echo): done.
    const written = `pod/${a.pod.metadata?.uid ?? keyOf(a.pod)}`;
    const patch = JSON.stringify(a.patch);
    if (this.writtenOver.has(written, a.pod.metadata?.resourceVersion, patch)) return false;
    // Or already in place on the version the cache holds now (the echo of an earlier write came meanwhile).
    if (alreadyDone(a, this.d.pods.get(keyOf(a.pod)))) return false;
    const done = await this.patchPod(a.pod, a.patch, a.kind === 'lift' ? PatchType.json : PatchType.merge, log, what);
    if (done) this.writtenOver.note(written, a.pod.metadata?.resourceVersion, patch);
    if (!done || a.kind !== 'lift') return done;
    this.d.metrics.gatesLifted.inc({ reason: a.reason });
    if (a.warning) {
      const m = a.pod.metadata;
      await this.d.events.emit({ apiVersion: 'v1', kind: 'Pod', name: m?.name ?? '', namespace: m?.namespace, uid: m?.uid }, 'Warning', a.warning.reason, a.warning.message);
    }
    return true;
  }

  private async patchPod(pod: V1Pod, patch: unknown, type: PatchType, log: Logger, what: string): Promise<boolean> {
    try {
      await this.d.http.patch(`/api/v1/namespaces/${pod.metadata?.namespace}/pods/${pod.metadata?.name}`, patch, type);
      log.info({ pod: pod.metadata?.name }, what);
      return true;
    } catch (err) {
      // Gone or changed meanwhile (the test op failed): the next event decides again.
      if (isNotFound(err) || (err as { status?: number }).status === 422 || isConflict(err)) return false;
      // No RoleBinding to csi-handover-driver in the pod's namespace (the ClusterCSIDriver says so): not retried.
      if (isForbidden(err)) {
        this.d.access?.forget(pod.metadata?.namespace ?? '');
        log.warn({ pod: pod.metadata?.name, err: String(err) }, `may not patch this pod (403): not done: ${what}`);
        return false;
      }
      throw err;
    }
  }

  // ---- reporting ----

  /** What a handover teaches about early starts: how long the old leader took to be released, the new pod to try. */
  private learn(h: HandoverRecord, s: HandoverSnapshot): void {
    const old = h.oldPod === undefined ? undefined : this.observed.get(h.oldPod);
    const dep = old && s.workloadOf(old.pod);
    if (!dep || h.oldPod === undefined) return;
    const workload = workloadRef(dep);
    const lesson = lessonOf(h, h.newPod === undefined ? undefined : this.letGo.get(h.newPod));
    if (lesson.death !== undefined) this.overlap.death(workload, old.pod.spec?.nodeName ?? '', h.oldPod, lesson.death);
    if (lesson.start !== undefined && h.newPod !== undefined) this.overlap.start(workload, h.newPod, lesson.start);
    if (lesson.lost) {
      this.overlap.lost(workload);
      this.d.metrics.overlapLost.inc();
      this.d.log.warn({ workload, lease: `${h.namespace}/${h.lease}`, pod: h.newHolder, afterMs: h.acquiredAt - (this.letGo.get(h.newPod ?? '')?.at ?? NaN) }, 'a pod started before the release lost the race for its lease: new pods of this workload wait for the release again until relearned');
    }
  }

  private reportHandover(h: HandoverRecord, s: HandoverSnapshot): void {
    this.learn(h, s);
    const driver = handoverOwner(s, h);
    if (!driver) return; // not a lease of a managed workload
    if (this.d.reports.add(driver, h)) this.d.onReportChanged(driver);
    this.d.log.info({ lease: `${h.namespace}/${h.lease}`, oldHolder: h.oldHolder, newHolder: h.newHolder, gapMs: h.gapMs, releasedBy: h.releasedBy, driver }, 'lease handed over');
    // Every replica measures (a new leader adds what the old one did not report); only the leader counts and tells.
    if (!this.active) return;
    if (h.gapMs !== undefined) this.d.metrics.handoverGap.observe({ namespace: h.namespace, lease: h.lease, released_by: h.releasedBy }, h.gapMs / 1000);
    if (h.releasedBy !== 'operator') this.d.metrics.releases.inc({ released_by: h.releasedBy });
    this.told.add(driver, h);
  }

  /**
   * One Event on the driver's CR for the handovers it saw together, naming each lease's old and new holder. (Until
   * 2026-12 each new leader pod got a LeaseAcquired Event too: a second write per handover saying the same.)
   */
  private tell(driver: string, told: HandoverRecord[]): void {
    const sent = this.d.events.emit({ apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', name: driver }, 'Normal', 'LeaseHandedOver', handoversMessage(told));
    this.telling.add(sent);
    void sent.finally(() => this.telling.delete(sent));
  }
}
