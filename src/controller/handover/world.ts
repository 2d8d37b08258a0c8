// What the handover engine has observed of the cluster — the pods (with what their past versions told), who
// holds which lease, the nodes — kept from the informers' events, and the snapshot every decision is made on.
import type { V1Deployment, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../../clock.js';
import { readinessChanged } from '../../handover/cached.js';
import { LeaseHolderIndex } from '../../handover/lease-holder-index.js';
import { type ObservedPod, observePod, observePodGone, observeWitnessEvidence } from '../../handover/observed-pod.js';
import {
  CONTAINERS_EXITED,
  type EvidenceContext,
  type EvidenceSource,
  type EvidenceVerdict,
  judgeEvidence,
  type WitnessEvidence,
  witnessEvidence,
} from '../../handover/witness-evidence.js';
import { ObservedPods } from '../../handover/observed-pods.js';
import { HandoverSnapshot } from '../../handover/snapshot.js';
import { type InformerView, keyOf } from '../../kube/informer.js';

/** How long a deleted pod is remembered: a lease it held may still name it, and a handover measure it. */
const TOMBSTONE_TTL_MS = 10 * 60_000;

export const uidOf = (pod: V1Pod): string => pod.metadata?.uid ?? keyOf(pod);
const nameOf = (o: { metadata?: { name?: string } }): string => o.metadata?.name ?? '';

export class ObservedWorld {
  private readonly pods = new ObservedPods();
  private readonly leaseHolders = new LeaseHolderIndex();
  private readonly nodes = new Map<string, V1Node>();

  /** Seeded with the caches' leases and nodes; pods come with their events. */
  constructor(
    private readonly d: {
      leases: InformerView<V1Lease>;
      nodes: InformerView<V1Node>;
      deployments: () => V1Deployment[];
      now: Clock;
      /** What the witness's evidence is judged against, but for when it arrived. */
      evidenceContext: () => Omit<EvidenceContext, 'receivedAt'>;
    },
  ) {
    for (const l of d.leases.list()) this.leaseSeen(l);
    for (const n of d.nodes.list()) this.nodeSeen(n);
  }

  /** `fresh`: pods re-read from the API just now (by uid), over what was observed. */
  snapshot(fresh?: ReadonlyMap<string, ObservedPod>): HandoverSnapshot {
    const podsIn = (ns: string): ObservedPod[] => this.pods.inNamespace(ns);
    return new HandoverSnapshot(
      {
        deployments: this.d.deployments,
        podsIn: fresh ? (ns) => podsIn(ns).map((o) => fresh.get(o.pod.metadata?.uid ?? '') ?? o) : podsIn,
        leasesIn: (ns) => this.leaseHolders.inNamespace(ns).flatMap((name) => this.d.leases.get(`${ns}/${name}`) ?? []),
        nodes: this.nodes,
      },
      this.d.now(),
    );
  }

  pod(uid: string): ObservedPod | undefined {
    return this.pods.get(uid);
  }

  /**
   * A new version of a pod: what it tells, added to what its earlier versions told. A witness condition it carries
   * for the first time is judged now (`judged`). Returns the previous observation too.
   */
  podSeen(pod: V1Pod): { previous?: ObservedPod; observed: ObservedPod; judged?: EvidenceVerdict } {
    const uid = uidOf(pod);
    const previous = this.pods.get(uid);
    let observed = observePod(previous, pod);
    const condition = pod.status?.conditions?.find((c) => c.type === CONTAINERS_EXITED);
    let judged: EvidenceVerdict | undefined;
    if (condition && condition.message !== observed.conditionJudged) {
      observed = { ...observed, conditionJudged: condition.message ?? '' };
      const evidence = witnessEvidence(pod);
      judged = evidence
        ? this.judge(observed, evidence, 'condition', this.d.now())
        : { accepted: false, reason: 'malformed', message: `its condition ${CONTAINERS_EXITED} does not read as the witness writes it` };
      if (judged.accepted) observed = observeWitnessEvidence(observed, judged.evidence);
    }
    this.pods.set(uid, observed);
    return { previous, observed, judged };
  }

  /** The pod object is gone: kept as a tombstone for TOMBSTONE_TTL_MS. Returns the cutoff older tombstones were dropped at. */
  podGone(pod: V1Pod): number {
    const uid = uidOf(pod);
    this.pods.set(uid, observePodGone(this.pods.get(uid), pod, this.d.now()));
    const cutoff = this.d.now() - TOMBSTONE_TTL_MS;
    this.pods.dropGoneBefore(cutoff);
    return cutoff;
  }

  /**
   * The witness of `evidence.node` (its token reviewed) reported pod `uid`'s containers exited, the report arriving
   * at `receivedAt`: kept only if it stands (judgeEvidence) for a pod observed in a graceful deletion on that node.
   */
  witnessReported(uid: string, evidence: WitnessEvidence, receivedAt: number): { pod: V1Pod } | { refused: string; verdict?: EvidenceVerdict } {
    const o = this.pods.get(uid);
    if (!o) return { refused: `no pod with uid ${uid} is observed` };
    if (o.pod.spec?.nodeName !== evidence.node) return { refused: `pod ${uid} runs on ${o.pod.spec?.nodeName ?? 'no node'}, not ${evidence.node}` };
    const verdict = this.judge(o, evidence, 'report', receivedAt);
    if (!verdict.accepted) return { refused: verdict.message, verdict };
    this.pods.set(uid, observeWitnessEvidence(o, verdict.evidence));
    return { pod: o.pod };
  }

  private judge(o: ObservedPod, e: WitnessEvidence, source: EvidenceSource, receivedAt: number): EvidenceVerdict {
    const pod = { nodeName: o.pod.spec?.nodeName, deletionRequestedAt: o.deletionRequestedAt };
    return judgeEvidence(e, source, pod, { ...this.d.evidenceContext(), receivedAt });
  }

  podsOnNode(node: string | undefined): ObservedPod[] {
    return this.pods.onNode(node);
  }

  leaseSeen(lease: V1Lease): void {
    this.leaseHolders.set(lease);
  }

  leaseGone(lease: V1Lease): void {
    this.leaseHolders.delete(lease);
  }

  /** The names of the leases in `namespace` held by `identity` (or `<identity>_<suffix>`). */
  leasesHeldBy(namespace: string, identity: string): readonly string[] {
    return this.leaseHolders.heldBy(namespace, identity);
  }

  /** A version of a node; whether its readiness changed (every pod on it is then concerned). */
  nodeSeen(node: V1Node): boolean {
    const old = this.nodes.get(nameOf(node));
    this.nodes.set(nameOf(node), node);
    return old !== undefined && readinessChanged(node, old);
  }

  nodeGone(node: V1Node): void {
    this.nodes.delete(nameOf(node));
  }
}
