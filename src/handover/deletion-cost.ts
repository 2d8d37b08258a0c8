// Leader last: pods holding leases get a higher controller.kubernetes.io/pod-deletion-cost than standbys,
// so a rollout (the old ReplicaSet scaling down) replaces standbys first and each lease moves about once.
// One value for any number of leases: the order that matters is leader before standby, and a cost that
// counted leases would be patched again for every lease a new leader picks up (six in a CSI rollout).
import type { V1Pod } from '@kubernetes/client-node';

export const DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';
const LEADER_COST = '100';

/** The annotation value a pod should carry: a leader's, whatever it holds; standbys need none (0 is the default). */
export function desiredDeletionCost(leasesHeld: number): string | undefined {
  return leasesHeld > 0 ? LEADER_COST : undefined;
}

/** A merge patch of a pod's annotations (null removes one). */
export interface AnnotationPatch {
  metadata: { annotations: Record<string, string | null> };
}

/** Whether the pod already carries every annotation the patch writes (null: absent). */
export const carriesAnnotations = (pod: V1Pod, patch: AnnotationPatch): boolean =>
  Object.entries(patch.metadata.annotations).every(([k, v]) => (pod.metadata?.annotations?.[k] ?? null) === v);

/** The merge patch to apply, or undefined when the pod already carries the right cost (treating absent as 0). */
export function deletionCostPatch(pod: V1Pod, leasesHeld: number): AnnotationPatch | undefined {
  const current = pod.metadata?.annotations?.[DELETION_COST];
  const want = desiredDeletionCost(leasesHeld);
  if ((current ?? '0') === (want ?? '0')) return undefined;
  return { metadata: { annotations: { [DELETION_COST]: want ?? null } } };
}
