// What the operator remembers of a pod: its last observed object, kept as a tombstone after the object is
// deleted, because a dead lease holder is usually proven dead only after its pod is gone.
import type { V1Pod } from '@kubernetes/client-node';
import { parseKubeTime } from './kube-time.js';
import type { WitnessEvidence } from './witness-evidence.js';

export interface ObservedPod {
  /** Last observed object (for a tombstone: the object the deletion event carried). */
  pod: V1Pod;
  /** The object has been deleted from the API. */
  gone: boolean;
  /** When we saw the deletion, ms on the operator's clock. */
  goneAt?: number;
  /** Grace period of a graceful deletion seen earlier (same uid): the kubelet's final delete rewrites it to 0, as a force deletion does. */
  gracefulDeletionSeconds?: number;
  /**
   * On the API server's clock: when the earliest graceful deletion seen of this pod was asked for (its
   * deletionTimestamp − grace). A later deletion with a shorter grace moves deletionTimestamp, not this.
   */
  deletionRequestedAt?: number;
  /** The node witness's evidence (same uid), from its report or its condition, whichever was accepted first (judgeEvidence). */
  witnessed?: WitnessEvidence;
  /** The witness condition's message last judged on this pod: a condition is judged once, when it first arrives. */
  conditionJudged?: string;
}

/** `namespace/name`, as events, logs and metrics name a pod. */
export function podRef(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

/** Being stopped: deleted from the API, or with a deletionTimestamp. */
export const isTerminating = (p: ObservedPod): boolean => p.gone || p.pod.metadata?.deletionTimestamp != null;

/** The grace period of the pod's deletion if it is a graceful one (deletionTimestamp set, grace > 0). */
function gracefulDeletionOf(pod: V1Pod): number | undefined {
  const grace = pod.metadata?.deletionGracePeriodSeconds;
  return pod.metadata?.deletionTimestamp != null && typeof grace === 'number' && grace > 0 ? grace : undefined;
}

/** A graceful deletion remembered from `previous`, only if it describes the same pod (a re-created pod is another). */
function carriedGrace(previous: ObservedPod | undefined, pod: V1Pod): number | undefined {
  if (!previous || previous.pod.metadata?.uid === undefined || previous.pod.metadata.uid !== pod.metadata?.uid) return undefined;
  return previous.gracefulDeletionSeconds ?? gracefulDeletionOf(previous.pod);
}

/** The grace period of the graceful deletion the pod is under: deleting now, and graceful now or earlier. */
export function gracefulDeletionSeconds(p: ObservedPod): number | undefined {
  if (p.pod.metadata?.deletionTimestamp == null) return undefined;
  return gracefulDeletionOf(p.pod) ?? (p.gracefulDeletionSeconds !== undefined && p.gracefulDeletionSeconds > 0 ? p.gracefulDeletionSeconds : undefined);
}

/** When this version's graceful deletion was asked for, on the API server's clock. */
function deletionRequestOf(pod: V1Pod): number | undefined {
  const grace = gracefulDeletionOf(pod);
  const at = parseKubeTime(pod.metadata?.deletionTimestamp);
  return grace === undefined || at === undefined ? undefined : at - grace * 1000;
}

/** What earlier observations of the same pod told that its new version does not: a graceful deletion, the witness's evidence. */
function carried(observed: ObservedPod, previous: ObservedPod | undefined): ObservedPod {
  const grace = gracefulDeletionOf(observed.pod) ?? carriedGrace(previous, observed.pod);
  const samePod = previous !== undefined && previous.pod.metadata?.uid !== undefined && previous.pod.metadata.uid === observed.pod.metadata?.uid;
  const witnessed = samePod ? previous.witnessed : undefined;
  const conditionJudged = samePod ? previous.conditionJudged : undefined;
  const requests = [samePod ? previous.deletionRequestedAt : undefined, deletionRequestOf(observed.pod)].filter((t): t is number => t !== undefined);
  return {
    ...observed,
    ...(grace !== undefined ? { gracefulDeletionSeconds: grace } : {}),
    ...(requests.length ? { deletionRequestedAt: Math.min(...requests) } : {}),
    ...(witnessed !== undefined ? { witnessed } : {}),
    ...(conditionJudged !== undefined ? { conditionJudged } : {}),
  };
}

/** The pod was added or updated: remember its state, and a graceful deletion once seen. */
export function observePod(previous: ObservedPod | undefined, pod: V1Pod): ObservedPod {
  return carried({ pod, gone: false }, previous);
}

/** The pod object was deleted: keep its last state as a tombstone. */
export function observePodGone(previous: ObservedPod | undefined, lastPod: V1Pod, now: number): ObservedPod {
  return carried({ pod: lastPod, gone: true, goneAt: now }, previous);
}

/** The witness's evidence was accepted (judgeEvidence): remembered until the pod is forgotten; the first accepted stays. */
export function observeWitnessEvidence(observed: ObservedPod, evidence: WitnessEvidence): ObservedPod {
  return observed.witnessed ? observed : { ...observed, witnessed: evidence };
}

/** The witness's accepted evidence on an observed pod, if any. A condition on the pod counts only once judged. */
export function witnessOf(p: ObservedPod): WitnessEvidence | undefined {
  return p.witnessed;
}
