// An independent observer for the fault tests and the soak: it watches one driver namespace's Leases and Pods
// (its own watches, not the operator's cache) and reads the real nodes' record of container processes
// (containerd's events, hack/node-record.ts), and checks the reliability invariants (hack/lib/invariants.ts)
// every few seconds while faults happen, then once more at the end together with the rollout and the CR status.
// Its watches relist after a 410 or an API server restart (the project's informer): what changed while it was
// disconnected is seen only as its end state, which can hide a short-lived record but never invent one.
import type { V1Deployment, V1Lease, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { HANDOVER_GATE, HANDOVER_STATE, RELEASED_BY_OPERATOR } from '../../src/api/names.js';
import type { KubeHttp } from '../../src/kube/http.js';
import { Informer } from '../../src/kube/informer.js';
import { type HandoverReport, reportFromStatus } from '../../src/handover/report.js';
import { type Handover, handoversFrom } from '../bench/handovers.js';
import { nodeEvents, waitFor } from './cluster.js';
import { OPERATOR_NAMESPACE, reportStatus } from './operator.js';
import { checkGates, checkLeases, type LeaseSample, type PodSample, type Violation } from './invariants.js';
import { deploymentPath } from './rollout.js';

export interface ObserverOptions {
  namespace: string;
  leases: readonly string[];
  gateTimeoutMs: number;
  log: Logger;
}

/** How long after a sample the periodic check judges it: the node record is appended a little after the fact. */
const RECORD_LAG_MS = 3_000;

/** What the observer saw over a run: its violations, and enough of what it judged to show it was not blind. */
export interface ObserverReport {
  violations: Violation[];
  /** holder changes from one pod to another, per lease, with how each was freed */
  handovers: (Handover & { freedBy: 'operator' | 'holder' | 'expiry' })[];
  /** pods that were created with the handover gate */
  gatedPods: number;
}

export class Observer {
  readonly leaseSamples: LeaseSample[] = [];
  readonly podSamples: PodSample[] = [];
  private readonly found = new Map<string, Violation>();
  private readonly leaseInformer: Informer<V1Lease>;
  private readonly podInformer: Informer<V1Pod>;
  private timer: NodeJS.Timeout | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  private checking = false;
  /** When the API server did not answer the observer's own probe (every 500 ms), or no operator pod was Ready. */
  readonly outages: { from: number; to: number }[] = [];
  private downSince: number | undefined;

  constructor(
    private readonly http: KubeHttp,
    private readonly opts: ObserverOptions,
  ) {
    const leases = new Set(opts.leases);
    this.leaseInformer = new Informer<V1Lease>(http, { path: `/apis/coordination.k8s.io/v1/namespaces/${opts.namespace}/leases`, log: opts.log });
    const seenLease = (l: V1Lease) => {
      const name = l.metadata?.name ?? '';
      if (!leases.has(name)) return;
      const s = l.spec;
      this.leaseSamples.push({
        t: Date.now(),
        namespace: opts.namespace,
        lease: name,
        holder: s?.holderIdentity ?? '',
        acquireTime: s?.acquireTime ? String(s.acquireTime) : undefined,
        renewTime: s?.renewTime ? String(s.renewTime) : undefined,
        leaseDurationSeconds: s?.leaseDurationSeconds,
        releasedByOperator: l.metadata?.annotations?.[RELEASED_BY_OPERATOR] !== undefined,
      });
    };
    this.leaseInformer.on('add', seenLease).on('update', seenLease);
    this.podInformer = new Informer<V1Pod>(http, { path: `/api/v1/namespaces/${opts.namespace}/pods`, log: opts.log });
    const seenPod = (deleted: boolean) => (p: V1Pod) => {
      this.podSamples.push({
        t: Date.now(),
        namespace: opts.namespace,
        name: p.metadata?.name ?? '',
        uid: p.metadata?.uid ?? '',
        created: Date.parse(String(p.metadata?.creationTimestamp ?? '')) || Date.now(),
        gated: (p.spec?.schedulingGates ?? []).some((g) => g.name === HANDOVER_GATE),
        state: p.metadata?.annotations?.[HANDOVER_STATE],
        deleted,
      });
    };
    this.podInformer.on('add', seenPod(false)).on('update', seenPod(false)).on('delete', seenPod(true));
  }

  async start(): Promise<void> {
    this.leaseInformer.start();
    this.podInformer.start();
    await Promise.all([this.leaseInformer.waitForSync(), this.podInformer.waitForSync()]);
    this.timer = setInterval(() => void this.check(Date.now() - RECORD_LAG_MS, false), 2_000);
    this.probeTimer = setInterval(() => void this.probe(), 500);
  }

  /**
   * Could the operator act? Not while the API server does not answer, nor while no operator pod is Ready (both
   * replicas crashed and in the kubelet's restart backoff): a gated pod can only be let go by a running operator.
   */
  private async probe(): Promise<void> {
    const at = Date.now();
    const answer = this.http
      .get<{ items: V1Pod[] }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/pods`, { labelSelector: 'app.kubernetes.io/name=csi-handover' })
      .then(
        (l) => l.items.some((p) => !p.metadata?.deletionTimestamp && p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
        () => false,
      );
    const ok = await Promise.race([answer, new Promise<boolean>((r) => setTimeout(() => r(false), 1_000))]);
    if (!ok) this.downSince ??= at;
    else if (this.downSince !== undefined) {
      this.outages.push({ from: this.downSince, to: Date.now() });
      this.downSince = undefined;
    }
  }

  /** Every violation found so far, each once, in the order they happened. */
  violations(): Violation[] {
    return [...this.found.values()].sort((a, b) => a.at - b.at);
  }

  private add(vs: readonly Violation[]): void {
    for (const v of vs) {
      const key = `${v.invariant} ${v.subject} ${v.message}`;
      if (!this.found.has(key)) {
        this.found.set(key, v);
        this.opts.log.error({ violation: v }, `invariant violated: ${v.invariant} ${v.subject}: ${v.message}`);
      }
    }
  }

  private async check(until: number, final: boolean): Promise<void> {
    if (this.checking && !final) return;
    this.checking = true;
    try {
      const events = await nodeEvents();
      this.add(checkLeases(this.leaseSamples, events, until));
      // A gate's allowance: the operator lifts on its timer (1 s) and creationTimestamp has whole seconds.
      const outages = this.downSince === undefined ? this.outages : [...this.outages, { from: this.downSince, to: Date.now() }];
      // After an outage the operator may need its own lease (15 s, a crashed leader's runs out) and its handover
      // queue's backoff cap (10 s, src/controller/handover.ts) before it lifts.
      this.add(
        checkGates(
          this.podSamples.filter((s) => s.t <= until),
          { gateTimeoutMs: this.opts.gateTimeoutMs, slackMs: 5_000, now: until, final, outages, retryAfterOutageMs: 25_000 },
        ),
      );
    } finally {
      this.checking = false;
    }
  }

  /**
   * The end: waits for the rollout of `deployment` to complete and the CR at `crPath` to report every lease with
   * its current holder and to be neither Progressing nor Degraded, then checks everything once more. Returns every
   * violation found through the run, and what was seen.
   */
  async finish(deployment: string, crPath: string, settleMs = 120_000): Promise<ObserverReport> {
    const now = () => Date.now();
    const rolled = await waitFor(
      `the rollout of ${deployment} to complete`,
      settleMs,
      async () => {
        const d = await this.http.get<V1Deployment>(deploymentPath(this.opts.namespace, deployment)).catch(() => undefined);
        const st = d?.status,
          want = d?.spec?.replicas ?? 1;
        return (
          d &&
          (st?.observedGeneration ?? 0) >= (d.metadata?.generation ?? 0) &&
          st?.updatedReplicas === want &&
          st.readyReplicas === want &&
          (st.replicas ?? 0) === want
        );
      },
      1_000,
    ).then(
      () => true,
      () => false,
    );
    if (!rolled)
      this.add([
        {
          invariant: 'rollout-incomplete',
          at: now(),
          subject: `${this.opts.namespace}/${deployment}`,
          message: `not complete ${settleMs / 1000} s after the last fault`,
        },
      ]);
    let diverged = '';
    await waitFor(
      'the CR status to converge',
      settleMs,
      async () => {
        diverged = await this.statusDivergence(crPath);
        return diverged === '';
      },
      1_000,
    ).catch(() => undefined);
    if (diverged) this.add([{ invariant: 'status-diverged', at: now(), subject: crPath, message: diverged }]);
    this.stopWatching();
    await new Promise((r) => setTimeout(r, RECORD_LAG_MS));
    await this.check(Infinity, true);
    return { violations: this.violations(), handovers: this.handovers(), gatedPods: new Set(this.podSamples.filter((p) => p.gated).map((p) => p.uid)).size };
  }

  /**
   * Every holder change seen, with how the lease was freed: released by the operator or the holder, or by expiry;
   * with the old holders' stop times (sigtermTimes) each also has its gap.
   */
  handovers(stops: ReadonlyMap<string, number> = new Map()): ObserverReport['handovers'] {
    return handoversFrom(
      this.leaseSamples.map((s) => ({ t: s.t, lease: s.lease, holder: s.holder })),
      stops,
    ).map((h) => {
      const release = h.releasedAt === undefined ? undefined : this.leaseSamples.find((s) => s.lease === h.lease && s.t === h.releasedAt && s.holder === '');
      return { ...h, freedBy: release === undefined ? 'expiry' : release.releasedByOperator ? 'operator' : 'holder' };
    });
  }

  /** '' when the CR's report names each lease's current holder and its conditions are settled; else what differs. */
  private async statusDivergence(crPath: string): Promise<string> {
    const cr = await this.http.get<{ status?: { conditions?: { type: string; status: string; reason?: string }[] } }>(crPath).catch(() => undefined);
    if (!cr) return 'the CR cannot be read';
    const report: HandoverReport | undefined = reportFromStatus(await reportStatus(this.http, crPath.split('/').pop() ?? ''));
    const wrong: string[] = [];
    for (const lease of this.opts.leases) {
      const holder = this.leaseInformer.list().find((l) => l.metadata?.name === lease)?.spec?.holderIdentity ?? '';
      const reported = report?.leases.find((h) => h.namespace === this.opts.namespace && h.lease === lease);
      // A lease never handed over while the operator watched has no entry; one that was must name its holder.
      if (reported && reported.newHolder !== holder) wrong.push(`${lease}: reported ${reported.newHolder}, held by ${holder || 'nobody'}`);
    }
    for (const c of cr.status?.conditions ?? []) {
      if (c.type === 'CSIHandoverProgressing' && c.status !== 'False') wrong.push(`Progressing ${c.status} (${c.reason ?? ''})`);
      if (c.type === 'CSIHandoverDegraded' && c.status !== 'False') wrong.push(`Degraded ${c.status} (${c.reason ?? ''})`);
    }
    return wrong.join('; ');
  }

  stopWatching(): void {
    if (this.timer) clearInterval(this.timer);
    if (this.probeTimer) clearInterval(this.probeTimer);
    this.timer = this.probeTimer = undefined;
    this.leaseInformer.stop();
    this.podInformer.stop();
  }
}
