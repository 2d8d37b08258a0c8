// What the operator remembers of a pod: its last observed object, kept as a tombstone after the object is
// deleted, because a dead lease holder is usually proven dead only after its pod is gone.
import type { V1Pod } from '@kubernetes/client-node';
import { type WitnessEvidence, witnessEvidence } from './witness-evidence.js';

export interface ObservedPod {
  /** Last observed object (for a tombstone: the object the deletion event carried). */
  pod: V1Pod;
  /** The object has been deleted from the API. */
  gone: boolean;
  /** When we saw the deletion, ms on the operator's clock. */
  goneAt?: number;
  /** Grace period of a graceful deletion seen earlier (same uid): the kubelet's final delete rewrites it to 0, as a force deletion does. */
  gracefulDeletionSeconds?: number;
  /** The node witness's report, sent straight to the operator (same uid): its condition on the pod may come later. */
  witnessed?: WitnessEvidence;
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

/** What earlier observations of the same pod told that its new version does not: a graceful deletion, a witness's report. */
function carried(observed: ObservedPod, previous: ObservedPod | undefined): ObservedPod {
  const grace = gracefulDeletionOf(observed.pod) ?? carriedGrace(previous, observed.pod);
  const samePod = previous !== undefined && previous.pod.metadata?.uid !== undefined && previous.pod.metadata.uid === observed.pod.metadata?.uid;
  const witnessed = samePod ? previous.witnessed : undefined;
  return {
    ...observed,
    ...(grace !== undefined ? { gracefulDeletionSeconds: grace } : {}),
    ...(witnessed !== undefined ? { witnessed } : {}),
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

/** The witness reported every container of the pod exited: remembered until the pod is forgotten. */
export function observeWitnessReport(observed: ObservedPod, evidence: WitnessEvidence): ObservedPod {
  return { ...observed, witnessed: evidence };
}

/** The witness's evidence on an observed pod: its report to the operator, else its condition on the pod. */
export function witnessOf(p: ObservedPod): WitnessEvidence | undefined {
  return p.witnessed ?? witnessEvidence(p.pod);
}
