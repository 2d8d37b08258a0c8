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
