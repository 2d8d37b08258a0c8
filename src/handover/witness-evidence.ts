// The node witness's evidence on a pod: a status condition of our own type, which the kubelet keeps (it merges
// conditions it does not own), written only by the witness of the pod's own node (a ValidatingAdmissionPolicy
// holds each writer to its node) and only on a pod already being deleted. The precise time is in the message:
// a condition's own times have whole seconds, and the release rule compares it with a Lease's renewTime.
import { isReady } from './ready.js';
import type { V1Node, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { microTime } from '../leaderelection/lease-record.js';
import { parseKubeTime } from './kube-time.js';

export const CONTAINERS_EXITED = 'csi-handover.io/containers-exited';
export const CONTAINERS_EXITED_REASON = 'AllContainersExited';
/** The witness's pods, in the operator's namespace (config/witness). */
export const WITNESS_SELECTOR = 'app.kubernetes.io/name=csi-handover,app.kubernetes.io/component=witness';

/**
 * The nodes where a witness pod runs Ready, on a Ready node (a witness's pod stays Ready for a while after its
 * node went silent); a witness being deleted no longer counts.
 */
export function witnessedNodes(witnessPods: readonly V1Pod[], nodes: readonly V1Node[]): Set<string> {
  const readyNodes = new Set(nodes.filter(isReady).map((n) => n.metadata?.name ?? ''));
  const out = new Set<string>();
  for (const p of witnessPods) {
    const node = p.spec?.nodeName;
    if (node && readyNodes.has(node) && isReady(p) && p.metadata?.deletionTimestamp == null) out.add(node);
  }
  return out;
}

export interface WitnessEvidence {
  /**
   * On the node's clock (the clock the holder stamped its renewals with): the witness listed the pod's container
   * cgroups at this instant and found none with a process left but the sandbox. Anything started later is not
   * covered, so a Lease renewed at or after it was renewed by someone this evidence says nothing about.
   */
  exitedBy: number;
  node: string;
}

const MESSAGE = /^every container exited by (\S+) on node ([^\s;]+)(?:;|$)/;

export function evidenceMessage(e: WitnessEvidence, detail: string): string {
  return `every container exited by ${microTime(e.exitedBy)} on node ${e.node}; ${detail}`;
}

export function witnessCondition(e: WitnessEvidence, detail: string, now: number): V1PodCondition {
  return {
    type: CONTAINERS_EXITED,
    status: 'True',
    reason: CONTAINERS_EXITED_REASON,
    message: evidenceMessage(e, detail),
    lastTransitionTime: new Date(now),
  };
}

/** The witness's evidence on `pod`, if any and well-formed; anything else is no evidence (and changes nothing). */
export function witnessEvidence(pod: V1Pod): WitnessEvidence | undefined {
  const c = pod.status?.conditions?.find((x) => x.type === CONTAINERS_EXITED);
  if (c?.status !== 'True' || c.reason !== CONTAINERS_EXITED_REASON || typeof c.message !== 'string') return undefined;
  const m = MESSAGE.exec(c.message);
  if (!m) return undefined;
  const exitedBy = parseKubeTime(m[1]);
  return exitedBy === undefined ? undefined : { exitedBy, node: m[2] ?? '' };
}

/** Where a piece of evidence came from: the condition on the pod, or the report sent straight to the operator. */
export type EvidenceSource = 'condition' | 'report';

/**
 * How far a node's clock (exitedBy) may be from the API server's (deletionTimestamp) and the operator's (when the
 * evidence arrived). The nodes here share one clock; NTP-disciplined nodes stay within tens of milliseconds. An
 * allowance wider than the skew only lets a witness date its evidence a little later than it could have seen it,
 * which the release rule then reads against the Lease's renewals (release.ts).
 */
export const DEFAULT_CLOCK_SKEW_MS = 1_000;

export interface EvidenceContext {
  /** On the operator's clock: when the report came, or the pod version carrying the condition was first seen. */
  receivedAt: number;
  clockSkewMs: number;
  /** Nodes where a witness runs Ready, on a Ready node (witnessedNodes). */
  witnessedNodes: ReadonlySet<string>;
  /** Whether only the witness can have written the condition: the admission policy is in force as shipped. */
  conditionTrust: { trusted: true } | { trusted: false; why: string };
}

export type EvidenceRejection =
  'malformed' | 'policy-not-in-force' | 'not-gracefully-deleted' | 'another-node' | 'no-witness-on-node' | 'dated-after-receipt' | 'dated-before-deletion';

export type EvidenceVerdict = { accepted: true; evidence: WitnessEvidence } | { accepted: false; reason: EvidenceRejection; message: string };

/**
 * Whether evidence about `pod` may stand as proof of its death. It must come from where only the witness of the
 * pod's node can speak (a report is authenticated by its token; a condition only while the admission policy holds
 * every writer of it), about a pod in a graceful deletion on a node where a witness runs Ready now, and its instant
 * must fall between the deletion request and its own arrival, give or take the clocks' skew: a witness cannot see
 * an exit before it was asked for, nor after it said so. `deletionRequestedAt` is on the API server's clock: the
 * earliest deletionTimestamp − grace seen for this pod (undefined: no graceful deletion seen).
 */
export function judgeEvidence(
  e: WitnessEvidence,
  source: EvidenceSource,
  pod: { nodeName: string | undefined; deletionRequestedAt: number | undefined },
  ctx: EvidenceContext,
): EvidenceVerdict {
  const reject = (reason: EvidenceRejection, message: string): EvidenceVerdict => ({ accepted: false, reason, message });
  if (source === 'condition' && !ctx.conditionTrust.trusted) return reject('policy-not-in-force', `anyone may have written it: ${ctx.conditionTrust.why}`);
  if (pod.deletionRequestedAt === undefined) return reject('not-gracefully-deleted', 'no graceful deletion of the pod was seen');
  if (e.node !== pod.nodeName) return reject('another-node', `it names node ${e.node}, the pod runs on ${pod.nodeName ?? 'no node'}`);
  if (!ctx.witnessedNodes.has(e.node)) return reject('no-witness-on-node', `no witness runs Ready on node ${e.node}`);
  const at = microTime(e.exitedBy);
  if (e.exitedBy > ctx.receivedAt + ctx.clockSkewMs)
    return reject('dated-after-receipt', `it dates the exit ${at}, after it arrived (${microTime(ctx.receivedAt)}, ±${ctx.clockSkewMs} ms)`);
  if (e.exitedBy < pod.deletionRequestedAt - ctx.clockSkewMs)
    return reject(
      'dated-before-deletion',
      `it dates the exit ${at}, before the deletion was asked for (${microTime(pod.deletionRequestedAt)}, ±${ctx.clockSkewMs} ms)`,
    );
  return { accepted: true, evidence: e };
}
