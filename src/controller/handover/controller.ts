// The handover engine: routes each observed change to the keys it concerns (a lease, a workload, a pod behind
// an orphaned gate) and reconciles a key by carrying out the plan src/handover/plan.ts decides over one snapshot.
// What it observes, writes and tells are parts of their own (world, writes, reporting, early starts, admission).
import type { V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import { hasHandoverGate } from '../../handover/gate.js';
import { podIdentity } from '../../handover/holder.js';
import { handoverPendingFor } from '../../handover/pending.js';
import { planLease, planOperatorLeaving, planOrphanGate, planWorkload, startsUngated } from '../../handover/plan.js';
import { workloadRef } from '../../handover/snapshot.js';
import type { EvidenceSource, EvidenceVerdict, WitnessEvidence } from '../../handover/witness-evidence.js';
import { podRef } from '../../handover/observed-pod.js';
import type { ReconcileResult, WorkQueue } from '../../kube/workqueue.js';
import type { Part } from '../part.js';
import { controllerQueue } from '../queue.js';
import { HandoverAdmission } from './admission.js';
import { type HandoverDeps, type HandoverKey, keyId, keyIn } from './deps.js';
import { EarlyStarts } from './early-starts.js';
import { HandoverReporting } from './reporting.js';
import { ObservedWorld } from './world.js';
import { HandoverWrites } from './writes.js';

const QUEUE = { controller: 'handover', id: keyId, concurrency: 4, backoff: { baseMs: 100, maxMs: 10_000 } } as const;

export class HandoverController implements Part {
  readonly name = 'handover';
  readonly needsLeadership = true;
  readonly queue: WorkQueue<HandoverKey>;
  readonly admission: HandoverAdmission;
  private readonly world: ObservedWorld;
  private readonly writes: HandoverWrites;
  private readonly reporting: HandoverReporting;
  private readonly early: EarlyStarts;
  private active = false;

  constructor(private readonly d: HandoverDeps) {
    const world = (this.world = new ObservedWorld({
      ...d,
      evidenceContext: () => ({ witnessedNodes: d.witnessedNodes(), conditionTrust: d.witnessConditionTrust(), clockSkewMs: d.witnessClockSkewMs }),
    }));
    this.writes = new HandoverWrites({ ...d, cachedPod: (key) => d.pods.get(key) });
    this.reporting = new HandoverReporting({ ...d, world });
    this.early = new EarlyStarts({ ...d, enabled: d.earlyStart, stopSeenAt: (uid) => this.reporting.stopSeenAt(uid) });
    this.admission = new HandoverAdmission({ ...d, world, early: this.early });
    this.queue = controllerQueue({ ...QUEUE, metrics: d.metrics, log: d.log, reconcile: (k) => this.reconcile(k) });
    d.pods.on('add', this.podSeen).on('update', this.podSeen).on('delete', this.podGone);
    d.leases.on('add', this.leaseSeen).on('update', this.leaseSeen).on('delete', this.leaseGone);
    d.nodes
      .on('add', this.nodeSeen)
      .on('update', this.nodeSeen)
      .on('delete', (n) => world.nodeGone(n));
  }

  /** Only the leader acts; every replica observes, so a new leader starts with warm state. */
  start(): void {
    this.active = true;
    this.reporting.start();
    this.queue.start();
    for (const l of this.d.leases.list()) this.enqueue(keyIn('lease', l));
    for (const dep of this.d.deployments()) this.enqueue(keyIn('workload', dep));
  }

  /** Stops acting (a shutdown, or a lost leadership after which start() may come again); observing goes on. */
  async stop(): Promise<void> {
    this.active = false;
    await this.queue.shutDown();
    await this.reporting.stop();
  }

  /** The operator is going away for good: every pod still behind our gate is let go. Returns how many. */
  liftAllGates(why: string): Promise<number> {
    return this.writes.carryOutAll(planOperatorLeaving(this.d.pods.list(), why), this.d.log);
  }

  /**
   * The witness of `evidence.node` (its token reviewed, src/controller/witness-reports.ts) saw every container of
   * pod `uid` exit. Every replica keeps it (a new leader needs it as much); the pod's leases and workload are looked at.
   */
  witnessReported(uid: string, evidence: WitnessEvidence, receivedAt = this.d.now()): { accepted: true } | { accepted: false; reason: string } {
    const r = this.world.witnessReported(uid, evidence, receivedAt);
    if ('refused' in r) {
      const pod = this.world.pod(uid)?.pod;
      if (r.verdict && !r.verdict.accepted && pod) this.evidenceRejected(pod, 'report', r.verdict);
      return { accepted: false, reason: r.refused };
    }
    this.route(r.pod);
    return { accepted: true };
  }

  /** Evidence that does not stand: counted by every replica, told by the leader; the kubelet's report decides instead. */
  private evidenceRejected(pod: V1Pod, source: EvidenceSource, verdict: Extract<EvidenceVerdict, { accepted: false }>): void {
    this.d.metrics.witnessEvidenceRejected.inc({ source, reason: verdict.reason });
    const message = `the node witness's ${source} on ${podRef(pod)} is not taken as proof of death (${verdict.reason}): ${verdict.message}; the kubelet's report decides`;
    this.d.log.warn({ pod: podRef(pod), source, reason: verdict.reason }, message);
    if (!this.active) return;
    const m = pod.metadata;
    void this.d.events.emit(
      { apiVersion: 'v1', kind: 'Pod', namespace: m?.namespace, name: m?.name ?? '', uid: m?.uid },
      'Warning',
      'WitnessEvidenceRejected',
      message,
    );
  }

  /**
   * The namespaces of the managed workloads a new pod of which the webhook could hold back: every one but those
   * whose pods start ungated whatever their holders do (a live witness on each holder's node, no lost race lately).
   * Where there is no witness, every managed workload's namespace.
   */
  admissionNamespaces(): string[] {
    const s = this.world.snapshot();
    const early = this.early.earlyLift(s);
    return this.d.deployments().flatMap((dep) => (startsUngated(s, dep, early) ? [] : [dep.metadata?.namespace ?? '']));
  }

  // Heartbeats change nothing a decision reads; a change of readiness concerns every pod on the node.
  private readonly nodeSeen = (n: V1Node): void => {
    if (!this.world.nodeSeen(n)) return;
    for (const o of this.world.podsOnNode(n.metadata?.name)) this.route(o.pod);
    this.d.onAdmissionScopeChanged?.();
  };

  private enqueue(key: HandoverKey): void {
    if (this.active) this.queue.add(key);
  }

  private readonly podSeen = (pod: V1Pod): void => {
    const { previous, observed, judged } = this.world.podSeen(pod);
    if (judged && !judged.accepted) this.evidenceRejected(pod, 'condition', judged);
    const s = this.world.snapshot();
    this.early.podSeen(pod, previous, () => handoverPendingFor(s, pod));
    this.writes.seen({ pod });
    if (pod.metadata?.deletionTimestamp) this.reporting.podStopping(pod, observed);
    this.route(pod, s);
  };

  private readonly podGone = (pod: V1Pod): void => {
    const cutoff = this.world.podGone(pod);
    this.writes.seen({ pod });
    this.route(pod);
    this.reporting.prune(cutoff);
    this.early.prune(cutoff);
  };

  /** A pod changed: the leases it may hold (`<identity>` or `<identity>_<suffix>`, where its workload elects) and its workload. */
  private route(pod: V1Pod, s = this.world.snapshot()): void {
    const dep = s.workloadOf(pod);
    const identity = podIdentity(pod);
    if (identity) {
      for (const ns of dep ? s.leaseNamespacesOf(dep) : [pod.metadata?.namespace ?? '']) {
        for (const name of this.world.leasesHeldBy(ns, identity)) this.enqueue({ kind: 'lease', namespace: ns, name });
      }
    }
    if (dep) this.enqueue(keyIn('workload', dep));
    else if (hasHandoverGate(pod) && !pod.metadata?.deletionTimestamp) this.enqueue(keyIn('orphan-gate', pod));
  }

  private readonly leaseSeen = (lease: V1Lease, old?: V1Lease): void => {
    this.world.leaseSeen(lease);
    this.writes.seen({ lease });
    const s = this.world.snapshot();
    const { holder, handover } = this.reporting.leaseSeen(lease, s);
    if (handover) {
      const pod = (uid: string | undefined) => (uid === undefined ? undefined : this.world.pod(uid));
      this.early.learn(handover, pod(handover.oldPod), pod(handover.newPod), s);
      this.reporting.report(handover, s);
    }
    if (handover || holder !== old?.spec?.holderIdentity) this.d.onAdmissionScopeChanged?.();
    this.enqueue(keyIn('lease', lease));
    // Leadership moved: the new holder's workload re-checks deletion costs and gates. Renewals skip this.
    if (holder && holder !== old?.spec?.holderIdentity) {
      const r = s.resolve({ namespace: lease.metadata?.namespace ?? '', identity: holder });
      const dep = r.kind === 'pod' ? s.workloadOf(r.pod.pod) : undefined;
      if (dep) this.enqueue(keyIn('workload', dep));
    }
  };

  private readonly leaseGone = (lease: V1Lease): void => {
    this.world.leaseGone(lease);
    this.writes.seen({ lease });
    this.reporting.leaseGone(lease);
  };

  private async reconcile(key: HandoverKey): Promise<ReconcileResult> {
    const s = this.world.snapshot();
    const id = `${key.namespace}/${key.name}`;
    if (key.kind === 'lease') {
      const lease = this.d.leases.get(id);
      if (!lease) return;
      const plan = planLease(s, lease, s.now);
      const log = this.d.log.child({ lease: id });
      if (plan.action === 'refuse') this.reporting.refused(lease, plan, log);
      if (plan.action !== 'release') return;
      const { released, requeueAfterMs } = await this.writes.release(lease, plan, log);
      if (released && plan.recheck) this.enqueue({ kind: 'workload', ...plan.recheck });
      return { requeueAfterMs };
    }
    if (key.kind === 'workload') {
      const dep = s.deployment(key.namespace, key.name);
      if (!dep) return;
      const plan = planWorkload(s, dep, s.now, this.d.gateTimeoutMs, this.early.earlyLift(s));
      const log = this.d.log.child({ workload: workloadRef(dep) });
      for (const action of plan.actions) await this.writes.carryOut(action, log);
      return { requeueAfterMs: plan.requeueAfterMs };
    }
    const pod = this.d.pods.get(id);
    const action = pod && planOrphanGate(s, pod);
    if (action) await this.writes.carryOut(action, this.d.log.child({ pod: id }));
  }
}
