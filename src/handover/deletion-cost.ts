// Leader last: pods holding leases get a higher controller.kubernetes.io/pod-deletion-cost than standbys,
// so a rollout (the old ReplicaSet scaling down) replaces standbys first and each lease moves about once.
import type { V1Pod } from '@kubernetes/client-node';

export const DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';
const COST_PER_LEASE = 100;

/** The annotation value a pod should carry: by leases held; standbys need none (0 is the default). */
export function desiredDeletionCost(leasesHeld: number): string | undefined {
  return leasesHeld > 0 ? String(leasesHeld * COST_PER_LEASE) : undefined;
}

/** The merge patch to apply, or undefined when the pod already carries the right cost (treating absent as 0). */
export function deletionCostPatch(pod: V1Pod, leasesHeld: number): unknown {
  const current = pod.metadata?.annotations?.[DELETION_COST];
  const want = desiredDeletionCost(leasesHeld);
  if ((current ?? '0') === (want ?? '0')) return undefined;
  return { metadata: { annotations: { [DELETION_COST]: want ?? null } } };
}
