// Which of a workload's handovers are pending — a lease held by a pod being stopped that is not proven dead —
// and when new pods may start before the release: what the admission and the workload plans both decide on.
import type { V1Deployment, V1Lease, V1Pod } from '@kubernetes/client-node';
import { parseKubeTime } from './kube-time.js';
import { isTerminating, type ObservedPod } from './observed-pod.js';
import { provenDead } from './proven-dead.js';
import { type HandoverSnapshot, selects } from './snapshot.js';

const holderOf = (lease: V1Lease): string => (typeof lease.spec?.holderIdentity === 'string' ? lease.spec.holderIdentity : '');

/** A lease of a workload and the pod of that workload holding it. */
export interface HeldLease {
  lease: V1Lease;
  holder: ObservedPod;
}

/** The workload's leases and the pod of the workload holding each (leases held by no pod of it left out). */
export function heldLeases(s: HandoverSnapshot, dep: V1Deployment): HeldLease[] {
  const held: HeldLease[] = [];
  for (const lease of s.leasesOf(dep)) {
    const holder = holderOf(lease);
    if (!holder) continue;
    const r = s.resolve({ namespace: lease.metadata?.namespace ?? '', identity: holder });
    if (r.kind === 'pod' && selects(dep, r.pod.pod)) held.push({ lease, holder: r.pod });
  }
  return held;
}

/** When a lease runs out by its own record (renewTime + leaseDurationSeconds); undefined when the record does not say. */
export function expiresAt(lease: V1Lease): number | undefined {
  const renewedAt = parseKubeTime(lease.spec?.renewTime);
  const seconds: unknown = lease.spec?.leaseDurationSeconds;
  return renewedAt === undefined || typeof seconds !== 'number' || seconds <= 0 ? undefined : renewedAt + seconds * 1000;
}

/**
 * A handover is pending while a lease of the workload is held by a pod being stopped and not proven dead, and
 * has not run out: an expired lease goes to whoever asks first, with or without us, so holding new pods back
 * for it (a force-deleted leader, whose death is never proven) would only delay them until the gate timeout.
 */
export function pendingHandovers(s: HandoverSnapshot, held: readonly HeldLease[], now: number): HeldLease[] {
  return held.filter(({ lease, holder }) => isTerminating(holder) && !provenDead(holder, s.nodes).dead && !((expiresAt(lease) ?? Infinity) <= now));
}
/**
 * Whether a handover of the pod's workload is pending as `s` has it. At a pod's first sighting this says whether
 * it was created mid-handover: the ReplicaSet creates the replacement after the old pod's deletion, and one pod
 * watch delivers both in that order.
 */
export function handoverPendingFor(s: HandoverSnapshot, pod: V1Pod): boolean {
  const dep = s.workloadOf(pod);
  return dep !== undefined && pendingHandovers(s, heldLeases(s, dep), s.now).length > 0;
}

export const describePending = (pending: readonly HeldLease[]): string[] =>
  pending.map(({ lease, holder }) => `${lease.metadata?.namespace ?? ''}/${lease.metadata?.name ?? ''} ← ${holder.pod.metadata?.name ?? ''}`);

/**
 * When the new pods may start before the release (src/handover/overlap.ts): the earliest moment for each pending
 * holder, undefined when the operator has not learned enough to say.
 */
export type EarlyLift = (holder: ObservedPod) => number | undefined;

/** The moment every pending holder allows an early start, or undefined if one of them does not. */
export function earlyLiftFor(pending: readonly HeldLease[], early: EarlyLift | undefined): number | undefined {
  if (!early || pending.length === 0) return undefined;
  let at = -Infinity;
  for (const { holder } of pending) {
    const t = early(holder);
    if (t === undefined) return undefined;
    at = Math.max(at, t);
  }
  return at;
}

/** The state annotation of a pod let go before the release, because its old leader is predicted dead in time. */
export const OVERLAP_STATE_PREFIX = 'started: overlap';
export const overlapMessage = (pending: string[]): string => `overlap: ${pending.join(', ')} predicted released before this pod's sidecars can try`;
