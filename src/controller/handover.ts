// The handover engine: watches the Leases, Pods and Nodes around every managed controller Deployment and
// (1) releases a lease the moment its holder is proven dead, (2) keeps leaders last in a rollout through
// pod-deletion-cost, (3) lets gated new pods start once no handover is pending, and (4) measures and reports
// each handover. Every decision is a pure function in src/handover/; this file is the I/O around them.
import type { V1Deployment, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { deletionCostPatch } from '../handover/deletion-cost.js';
import { hasHandoverGate, liftGatePatch, liftGateWhenNoHandoverPending } from '../handover/gate.js';
import { podHostname, resolveHolder, sanitizeHostname } from '../handover/holder.js';
import { LeaseHolderIndex } from '../handover/lease-holder-index.js';
import { formatGap, type HandoverRecord, HandoverTracker } from '../handover/measure.js';
import { type ObservedPod, observePod, observePodGone, podRef } from '../handover/observed-pod.js';
import { ObservedPods } from '../handover/observed-pods.js';
import { provenDead } from '../handover/proven-dead.js';
import { decideRelease, releaseRecord } from '../handover/release.js';
import type { EventRecorder } from '../kube/events.js';
import { isConflict, isNotFound, type KubeHttp, PatchType } from '../kube/http.js';
import { type InformerView, keyOf } from '../kube/informer.js';
import { WorkQueue } from '../kube/workqueue.js';
import type { Metrics } from '../metrics.js';
import { DRIVER_LABEL } from './clustercsidriver.js';

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
  /** A handover of one of this driver's leases completed: its status needs an update. */
  onHandover: (driver: string) => void;
  now?: () => number;
}

export interface LeaseHandoverReport {
  /** the last handover of each lease of the driver */
  leases: HandoverRecord[];
  totals: { handovers: number; releasedByOperator: number; releasedByHolder: number; expired: number };
}

const TOMBSTONE_TTL_MS = 10 * 60_000;
/** On a gated pod: what it waits for (set while held back; its presence means it waited). */
export const HANDOVER_STATE = 'csi-handover.io/handover-state';
const leaseKey = (ns: string, name: string) => `lease/${ns}/${name}`;
const workloadKey = (ns: string, name: string) => `workload/${ns}/${name}`;

export class HandoverController {
  // Indexes kept from the informers' events, so one event costs work in proportion to what it touches:
  // observed pods by namespace and node, leases by holder, and the nodes by name.
  private readonly observed = new ObservedPods();
  private readonly leaseHolders = new LeaseHolderIndex();
  private readonly nodes = new Map<string, V1Node>();
  private readonly tracker = new HandoverTracker();
  private readonly reports = new Map<string, LeaseHandoverReport>();
  private readonly refusalsCounted = new Set<string>();
  readonly queue: WorkQueue;
  private readonly now: () => number;
  private active = false;

  constructor(private readonly d: HandoverDeps) {
    this.now = d.now ?? Date.now;
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
    d.leases.on('add', (l) => this.leaseSeen(l)).on('update', (l, old) => this.leaseSeen(l, old)).on('delete', (l) => this.leaseHolders.delete(l));
    d.nodes
      .on('add', (n) => this.nodes.set(n.metadata?.name ?? '', n))
      .on('update', (n) => {
        this.nodes.set(n.metadata?.name ?? '', n);
        this.nodeChanged(n);
      })
      .on('delete', (n) => this.nodes.delete(n.metadata?.name ?? ''));
  }

  /** Only the leader acts; every replica observes, so a new leader starts with warm state. */
  start(): void {
    this.active = true;
    this.queue.start();
    for (const l of this.d.leases.list()) this.queue.add(leaseKey(l.metadata?.namespace ?? '', l.metadata?.name ?? ''));
    for (const dep of this.d.deployments()) this.queue.add(workloadKey(dep.metadata?.namespace ?? '', dep.metadata?.name ?? ''));
  }

  async stop(): Promise<void> {
    this.active = false;
    await this.queue.shutDown();
  }

  report(driver: string): LeaseHandoverReport | undefined {
    return this.reports.get(driver);
  }

  // ---- observation ----

  private enqueue(key: string): void {
    if (this.active) this.queue.add(key);
  }

  private podSeen(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? keyOf(pod);
    const o = observePod(this.observed.get(uid), pod);
    this.observed.set(uid, o);
    if (pod.metadata?.deletionTimestamp) {
      const host = podHostname(pod);
      const deletion = Date.parse(String(pod.metadata.deletionTimestamp));
      const requestedAt = Number.isNaN(deletion) ? undefined : deletion - (o.gracefulDeletionSeconds ?? pod.metadata.deletionGracePeriodSeconds ?? 0) * 1000;
      if (host) this.tracker.holderStopping(sanitizeHostname(host), this.now(), requestedAt);
    }
    this.podChanged(pod);
  }

  private podGone(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? keyOf(pod);
    this.observed.set(uid, observePodGone(this.observed.get(uid), pod, this.now()));
    this.podChanged(pod);
    this.dropOldTombstones();
  }

  private podChanged(pod: V1Pod): void {
    const ns = pod.metadata?.namespace ?? '';
    const host = podHostname(pod);
    // The leases this pod may hold: holder `<identity>` or `<identity>_<suffix>`.
    if (host) for (const name of this.leaseHolders.heldBy(ns, sanitizeHostname(host))) this.enqueue(leaseKey(ns, name));
    const dep = this.deploymentOf(pod);
    if (dep) this.enqueue(workloadKey(ns, dep.metadata?.name ?? ''));
    // Fail open: our gate on a pod of a workload we no longer manage (label removed) is lifted at once.
    else if (hasHandoverGate(pod) && !pod.metadata?.deletionTimestamp) this.enqueue(`unmanaged-gate/${ns}/${pod.metadata?.name ?? ''}`);
  }

  private nodeChanged(node: V1Node): void {
    for (const o of this.observed.onNode(node.metadata?.name)) this.podChanged(o.pod);
  }

  private leaseSeen(lease: V1Lease, old?: V1Lease): void {
    this.leaseHolders.set(lease);
    const ns = lease.metadata?.namespace ?? '';
    const name = lease.metadata?.name ?? '';
    const holder = typeof lease.spec?.holderIdentity === 'string' ? lease.spec.holderIdentity : '';
    const record = this.tracker.observe(`${ns}/${name}`, holder, this.now(), lease.spec?.acquireTime ? String(lease.spec.acquireTime) : undefined);
    if (record) void this.reportHandover(record, ns);
    this.enqueue(leaseKey(ns, name));
    // Leadership moved: the new holder's workload re-checks deletion costs and gates. Renewals (most
    // lease events) change nothing there, so they skip the holder lookup.
    if (holder && holder !== old?.spec?.holderIdentity) {
      const r = resolveHolder(holder, this.managedPodsIn(ns), this.nodes);
      const dep = r.kind === 'pod' ? this.deploymentOf(r.pod.pod) : undefined;
      if (dep) this.enqueue(workloadKey(ns, dep.metadata?.name ?? ''));
    }
  }

  private dropOldTombstones(): void {
    this.observed.dropGoneBefore(this.now() - TOMBSTONE_TTL_MS);
    this.tracker.prune();
  }

  // ---- which pods belong to which workload ----

  private deploymentOf(pod: V1Pod): V1Deployment | undefined {
    return this.d.deployments().find((dep) => dep.metadata?.namespace === pod.metadata?.namespace && selects(dep, pod));
  }

  /** Observed pods (tombstones included) of every managed Deployment in the namespace. */
  private managedPodsIn(ns: string): ObservedPod[] {
    const deps = this.d.deployments().filter((dep) => dep.metadata?.namespace === ns);
    if (deps.length === 0) return [];
    return this.observed.inNamespace(ns).filter((o) => deps.some((dep) => selects(dep, o.pod)));
  }

  /** The leases of the namespace, from the informer's cache. */
  private leasesIn(ns: string): V1Lease[] {
    return this.leaseHolders.inNamespace(ns).flatMap((name) => this.d.leases.get(`${ns}/${name}`) ?? []);
  }

  // ---- reconcile ----

  private async reconcile(key: string): Promise<{ requeueAfterMs?: number } | void> {
    const [kind, ns, name] = key.split('/');
    if (!ns || !name) return;
    if (kind === 'lease') return this.reconcileLease(ns, name);
    if (kind === 'workload') return this.reconcileWorkload(ns, name);
    if (kind === 'unmanaged-gate') return this.liftUnmanagedGate(ns, name);
  }

  private async liftUnmanagedGate(ns: string, name: string): Promise<void> {
    const pod = this.d.pods.get(`${ns}/${name}`);
    if (!pod || !hasHandoverGate(pod) || this.deploymentOf(pod)) return;
    const patch = liftGatePatch(pod);
    if (!patch) return;
    const log = this.d.log.child({ pod: `${ns}/${name}` });
    if (await this.patchPod(pod, patch, PatchType.json, log, 'lifted the handover gate of a pod whose workload is not managed')) {
      this.d.metrics.gatesLifted.inc({ reason: 'unmanaged' });
    }
  }

  private async reconcileLease(ns: string, name: string): Promise<{ requeueAfterMs?: number } | void> {
    const lease = this.d.leases.get(`${ns}/${name}`);
    if (!lease) return;
    const pods = this.managedPodsIn(ns);
    if (pods.length === 0) return;
    const decision = decideRelease(lease, pods, this.nodes, this.now());
    const log = this.d.log.child({ lease: `${ns}/${name}` });
    if (decision.action === 'none') {
      this.countRefusal(lease, decision.reason, decision.message, pods, this.nodes, log);
      return;
    }
    // Decide again on the freshest record, and write only if the holder is still the dead identity.
    const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`;
    let fresh: V1Lease;
    try {
      fresh = await this.d.http.get<V1Lease>(path);
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    const again = decideRelease(fresh, pods, this.nodes, this.now());
    if (again.action !== 'release' || again.holder !== decision.holder || !fresh.spec) return;
    this.tracker.operatorReleasing(`${ns}/${name}`);
    try {
      await this.d.http.request('PUT', path, { body: { ...fresh, spec: releaseRecord(fresh.spec, this.now()) } });
    } catch (err) {
      this.tracker.operatorReleaseDone(`${ns}/${name}`, false, this.now());
      if (isConflict(err)) {
        // Someone else moved (a renewal, a candidate): re-read and decide again.
        this.d.metrics.releaseConflicts.inc();
        log.info({ holder: decision.holder }, 'lease changed before the release write (409): deciding again');
        return { requeueAfterMs: 1 };
      }
      throw err;
    }
    this.tracker.operatorReleaseDone(`${ns}/${name}`, true, this.now());
    this.d.metrics.releases.inc({ released_by: 'operator' });
    log.info({ holder: decision.holder, pod: decision.pod, evidence: decision.evidence }, 'released the lease of a dead holder');
    const dep = this.deploymentOf(pods.find((p) => podRef(p.pod) === decision.pod)?.pod ?? {});
    if (dep) this.enqueue(workloadKey(ns, dep.metadata?.name ?? ''));
  }

  /** Refusals matter while a handover is pending (the holder is terminating): count each once per holder. */
  private countRefusal(lease: V1Lease, reason: string, message: string, pods: ObservedPod[], nodes: Map<string, V1Node>, log: Logger): void {
    if (reason !== 'holder-alive' && reason !== 'unresolved-holder' && reason !== 'malformed-lease') return;
    const holder = typeof lease.spec?.holderIdentity === 'string' ? lease.spec.holderIdentity : '';
    const r = resolveHolder(holder, pods, nodes);
    const terminating = r.kind === 'pod' && (r.pod.gone || r.pod.pod.metadata?.deletionTimestamp);
    // Alive holders are the normal case; unknown or ambiguous identities and malformed leases always count.
    if (reason === 'holder-alive' && !terminating) return;
    const verdictReason = r.kind === 'pod' ? (provenDead(r.pod, nodes) as { reason?: string }).reason ?? reason : r.kind === 'unresolved' ? r.reason : reason;
    const once = `${keyOf(lease)}|${holder}|${verdictReason}`;
    if (this.refusalsCounted.has(once)) return;
    this.refusalsCounted.add(once);
    if (this.refusalsCounted.size > 10_000) this.refusalsCounted.clear();
    this.d.metrics.refusedReleases.inc({ reason: verdictReason });
    log.info({ holder, reason: verdictReason, message }, 'not releasing this lease');
  }

  private async reconcileWorkload(ns: string, name: string): Promise<{ requeueAfterMs?: number } | void> {
    const dep = this.d.deployments().find((x) => x.metadata?.namespace === ns && x.metadata?.name === name);
    if (!dep) return;
    const log = this.d.log.child({ workload: `${ns}/${name}` });
    const observed = this.observed.inNamespace(ns).filter((o) => selects(dep, o.pod));
    const held = new Map<string, string[]>(); // pod uid → leases it holds
    const pending: string[] = [];
    for (const l of this.leasesIn(ns)) {
      if (!l.spec?.holderIdentity) continue;
      const r = resolveHolder(l.spec.holderIdentity, observed, this.nodes);
      if (r.kind !== 'pod') continue;
      const uid = r.pod.pod.metadata?.uid ?? '';
      held.set(uid, [...(held.get(uid) ?? []), l.metadata?.name ?? '']);
      const terminating = r.pod.gone || !!r.pod.pod.metadata?.deletionTimestamp;
      if (terminating && !provenDead(r.pod, this.nodes).dead) pending.push(`${ns}/${l.metadata?.name} ← ${r.pod.pod.metadata?.name}`);
    }
    let requeue: number | undefined;
    for (const o of observed) {
      if (o.gone) continue;
      const pod = o.pod;
      const uid = pod.metadata?.uid ?? '';
      // Leader last: only live, non-terminating pods carry a cost.
      if (!pod.metadata?.deletionTimestamp && pod.spec?.nodeName) {
        const patch = deletionCostPatch(pod, held.get(uid)?.length ?? 0);
        if (patch) await this.patchPod(pod, patch, PatchType.merge, log, 'set pod-deletion-cost');
      }
      if (hasHandoverGate(pod) && !pod.metadata?.deletionTimestamp) {
        // The pod's handover state lives in an annotation, so a restarted operator resumes where it was.
        const state = pod.metadata?.annotations?.[HANDOVER_STATE];
        const decision = liftGateWhenNoHandoverPending(pod, pending, state !== undefined, this.now(), this.d.gateTimeoutMs);
        if (!decision.lift) {
          const waiting = `${decision.message}`;
          if (state !== waiting) await this.patchPod(pod, { metadata: { annotations: { [HANDOVER_STATE]: waiting } } }, PatchType.merge, log, 'holding the new pod back until the handover');
          const created = Date.parse(String(pod.metadata?.creationTimestamp ?? ''));
          const left = Number.isNaN(created) ? this.d.gateTimeoutMs : created + this.d.gateTimeoutMs - this.now();
          requeue = Math.min(requeue ?? Infinity, Math.max(100, left));
          continue;
        }
        const lift = liftGatePatch(pod);
        if (!lift) continue;
        // A pod that waited keeps a record of how it was let go.
        const patch = state === undefined ? lift : [...lift, { op: 'replace', path: `/metadata/annotations/${HANDOVER_STATE.replace('/', '~1')}`, value: `started: ${decision.message}` }];
        const lifted = await this.patchPod(pod, patch, PatchType.json, log, `lifted the handover gate (${decision.reason})`);
        if (lifted) {
          this.d.metrics.gatesLifted.inc({ reason: decision.reason });
          if (decision.reason === 'timeout') {
            await this.d.events.emit({ apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name ?? '', namespace: ns, uid }, 'Warning', 'HandoverGateTimeout', decision.message);
          }
        }
      }
    }
    return requeue === undefined ? undefined : { requeueAfterMs: requeue };
  }

  private async patchPod(pod: V1Pod, patch: unknown, type: PatchType, log: Logger, what: string): Promise<boolean> {
    try {
      await this.d.http.patch(`/api/v1/namespaces/${pod.metadata?.namespace}/pods/${pod.metadata?.name}`, patch, type);
      log.info({ pod: pod.metadata?.name }, what);
      return true;
    } catch (err) {
      // Gone or changed meanwhile (the test op failed): the next event decides again.
      if (isNotFound(err) || (err as { status?: number }).status === 422 || isConflict(err)) return false;
      throw err;
    }
  }

  // ---- reporting ----

  private async reportHandover(h: HandoverRecord, ns: string): Promise<void> {
    const pods = this.managedPodsIn(ns);
    const r = resolveHolder(h.oldHolder, pods, this.nodes);
    const n = resolveHolder(h.newHolder, pods, this.nodes);
    const pod = n.kind === 'pod' ? n.pod.pod : r.kind === 'pod' ? r.pod.pod : undefined;
    const dep = pod ? this.deploymentOf(pod) : undefined;
    const driver = dep?.metadata?.labels?.[DRIVER_LABEL];
    if (!driver) return; // not a lease of a managed workload
    const leaseName = h.lease.split('/')[1] ?? h.lease;
    const report = this.reports.get(driver) ?? { leases: [], totals: { handovers: 0, releasedByOperator: 0, releasedByHolder: 0, expired: 0 } };
    report.leases = [...report.leases.filter((x) => x.lease !== h.lease), h].sort((a, b) => a.lease.localeCompare(b.lease));
    report.totals.handovers++;
    if (h.releasedBy === 'operator') report.totals.releasedByOperator++;
    else if (h.releasedBy === 'holder') report.totals.releasedByHolder++;
    else report.totals.expired++;
    this.reports.set(driver, report);
    const gap = h.gapMs === undefined ? 'the old holder was not stopped' : `leaderless ${formatGap(h.gapMs)} after the old leader was told to stop`;
    const message = `lease ${h.lease}: ${h.oldHolder} → ${h.newHolder}, ${gap}, released by ${h.releasedBy}`;
    this.d.log.info({ lease: h.lease, oldHolder: h.oldHolder, newHolder: h.newHolder, gapMs: h.gapMs, releasedBy: h.releasedBy, driver }, 'lease handed over');
    this.d.onHandover(driver);
    // Every replica keeps the report (a new leader starts with it); only the leader counts and tells.
    if (!this.active) return;
    if (h.gapMs !== undefined) this.d.metrics.handoverGap.observe({ lease: leaseName, released_by: h.releasedBy }, h.gapMs / 1000);
    if (h.releasedBy !== 'operator') this.d.metrics.releases.inc({ released_by: h.releasedBy });
    await this.d.events.emit({ apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', name: driver }, 'Normal', 'LeaseHandedOver', message);
    if (n.kind === 'pod' && !n.pod.gone) {
      await this.d.events.emit({ apiVersion: 'v1', kind: 'Pod', name: n.pod.pod.metadata?.name ?? '', namespace: ns, uid: n.pod.pod.metadata?.uid }, 'Normal', 'LeaseAcquired', message);
    }
  }
}

/** A Deployment selects a pod by its selector's matchLabels (matchExpressions are not used by CSI drivers). */
function selects(dep: V1Deployment, pod: V1Pod): boolean {
  const match = dep.spec?.selector?.matchLabels;
  if (!match || Object.keys(match).length === 0 || dep.spec?.selector?.matchExpressions?.length) return false;
  return Object.entries(match).every(([k, v]) => pod.metadata?.labels?.[k] === v);
}
