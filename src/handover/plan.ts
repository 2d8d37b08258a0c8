// The handover engine's decisions, as plans: pure functions of one snapshot and `now` that say what to write,
// what to tell and when to look again. The controller only routes events to keys and carries plans out.
import type { V1Deployment, V1Lease, V1Pod } from '@kubernetes/client-node';
import { DRIVER_LABEL, HANDOVER_STATE, RELEASED_BY_OPERATOR } from '../api/names.js';
import { type AnnotationPatch, carriesAnnotations, deletionCostPatch } from './deletion-cost.js';
import { type GateDecision, gatePatch, hasHandoverGate, liftGatePatch, liftGateWhenNoHandoverPending, statePatch, waitingFor } from './gate.js';
import { parseKubeTime } from './kube-time.js';
import type { HandoverRecord, LeaseObservation } from './measure.js';
import { isTerminating, type ObservedPod, podRef } from './observed-pod.js';
import type { HolderResolution } from './holder.js';
import { type DeathVerdict, provenDead } from './proven-dead.js';
import { decideRelease, type ReleaseDecision } from './release.js';
import { describePending, earlyLiftFor, type EarlyLift, expiresAt, heldLeases, overlapMessage, pendingHandovers } from './pending.js';
import { type HandoverSnapshot, workloadRef } from './snapshot.js';

/** Why a pending handover is not released: the holder is not proven dead, or cannot be named, or the lease not read. */
export type RefusalReason =
  | Extract<DeathVerdict, { dead: false }>['reason']
  | Extract<HolderResolution, { kind: 'unresolved' }>['reason']
  | Extract<ReleaseDecision, { action: 'none' }>['reason'];

/** Every refusal reason (the metrics start each at zero, so the first refusal of a kind shows as an increase). */
export const REFUSAL_REASONS = [
  'containers-running',
  'force-deleted',
  'node-not-ready',
  'status-unknown',
  'not-terminating',
  'unknown-identity',
  'ambiguous-identity',
  'ambiguous-host-network',
  'not-held',
  'released-by-holder',
  'expired',
  'holder-alive',
  'unresolved-holder',
  'malformed-lease',
] as const satisfies readonly RefusalReason[];
// Compile-time check that the list above names every reason.
const everyRefusalListed: Exclude<RefusalReason, (typeof REFUSAL_REASONS)[number]> extends never ? true : never = true;
void everyRefusalListed;

export type LeasePlan =
  | { action: 'none' }
  /** A pending handover we will not release (the holder is not proven dead): logged and counted once per holder. */
  | { action: 'refuse'; holder: string; reason: RefusalReason; message: string }
  /** Release now; then the holder's workload (its gated pods) looks again. */
  | { action: 'release'; holder: string; pod: string; evidence: string; message: string; recheck?: { namespace: string; name: string } };

const holderOf = (lease: V1Lease): string => (typeof lease.spec?.holderIdentity === 'string' ? lease.spec.holderIdentity : '');

export function planLease(s: HandoverSnapshot, lease: V1Lease, now: number): LeasePlan {
  const namespace = lease.metadata?.namespace ?? '';
  const candidates = s.candidatesFor(namespace);
  if (candidates.length === 0) return { action: 'none' }; // no managed workload elects here
  const decision = decideRelease(lease, candidates, s.nodes, now);
  if (decision.action === 'release') {
    const r = s.resolve({ namespace, identity: decision.holder });
    const dep = r.kind === 'pod' ? s.workloadOf(r.pod.pod) : undefined;
    return {
      action: 'release',
      holder: decision.holder,
      pod: decision.pod,
      evidence: decision.evidence,
      message: decision.message,
      recheck: dep && { namespace: dep.metadata?.namespace ?? '', name: dep.metadata?.name ?? '' },
    };
  }
  if (decision.reason !== 'holder-alive' && decision.reason !== 'unresolved-holder' && decision.reason !== 'malformed-lease') return { action: 'none' };
  const holder = holderOf(lease);
  const r = s.resolve({ namespace, identity: holder });
  if (r.kind === 'pod') {
    // An alive holder that is not being stopped is the normal case, not a refusal.
    if (decision.reason === 'holder-alive' && !isTerminating(r.pod)) return { action: 'none' };
    const verdict = provenDead(r.pod, s.nodes);
    return { action: 'refuse', holder, reason: verdict.dead ? decision.reason : verdict.reason, message: decision.message };
  }
  // Another controller's lease in a namespace our drivers elect in: no handover of ours is pending, so nothing is
  // refused either (counting it would raise CSIHandoverReleaseRefused on each of its leader changes).
  if (r.kind === 'unresolved' && r.reason === 'unknown-identity' && s.foreignHolder({ namespace, identity: holder })) return { action: 'none' };
  return { action: 'refuse', holder, reason: r.kind === 'unresolved' ? r.reason : decision.reason, message: decision.message };
}

export type PodAction =
  | { kind: 'set-deletion-cost'; pod: V1Pod; patch: AnnotationPatch }
  | { kind: 'hold'; pod: V1Pod; message: string; patch: AnnotationPatch }
  | {
      kind: 'lift';
      pod: V1Pod;
      reason: Extract<GateDecision, { lift: true }>['reason'] | 'unmanaged' | 'operator-leaving';
      message: string;
      patch: unknown[];
      warning?: { reason: string; message: string };
    };

/**
 * Whether a pod action, decided on an earlier version of its pod, is already carried out on `current` (the pod as
 * the cache holds it when the patch is due): a workload's actions are decided on one snapshot and written one after
 * another, and a pod's newer version (our previous write's echo) can arrive meanwhile. A lift on a pod without our
 * gate would be refused (its test fails: 422), an annotation patch already in place would change nothing. A pod
 * gone from the cache, or replaced by another of its name, needs nothing either: its own events decide for it.
 */
export function alreadyDone(a: PodAction, current: V1Pod | undefined): boolean {
  if (!current || current.metadata?.uid !== a.pod.metadata?.uid) return true;
  return a.kind === 'lift' ? !hasHandoverGate(current) : carriesAnnotations(current, a.patch);
}

export interface WorkloadPlan {
  /** "namespace/lease ← pod" for each lease still held by a terminating pod of the workload not proven dead */
  pending: string[];
  actions: PodAction[];
  requeueAfterMs?: number;
}

export type AdmissionPlan =
  | { gate: false; reason: 'not-managed' | 'no-handover-pending' | 'not-gateable' | 'no-write-access'; message: string }
  /** Admitted ungated while a handover is pending: the old leader is predicted dead before this pod can try. */
  | { gate: false; reason: 'overlap'; message: string; patch: unknown[] }
  /** `earlyAt`: when it may start before the release, if the operator has learned enough to say */
  | { gate: true; message: string; patch: unknown[]; earlyAt?: number };

/**
 * Whether re-reading the holders could change a new pod's admission: not when every holder of its workload's
 * leases would let it start at once even while being stopped (a live node witness where it runs, no lost race
 * lately) — ungated either way, so the webhook answers from its cache and the pod is created that much sooner.
 * Whether it started mid-handover is then told by the order of the pod watch (handoverPendingFor).
 */
export function admissionSettled(s: HandoverSnapshot, pod: V1Pod, early?: EarlyLift): boolean {
  const dep = s.workloadOf(pod);
  return !dep || startsUngated(s, dep, early);
}

/**
 * Whether every new pod of `dep` is admitted ungated, whatever its lease holders do: each would let it start at
 * once even while being stopped. Then the webhook need not be asked about its namespace at all.
 */
export function startsUngated(s: HandoverSnapshot, dep: V1Deployment, early?: EarlyLift): boolean {
  if (!early) return false;
  return heldLeases(s, dep).every(({ holder }) => {
    const at = early(holder);
    return at !== undefined && at <= s.now;
  });
}

/**
 * A new pod of a managed controller is held back only while a handover is pending for its workload: then its
 * sidecars would try the lease before the release and wait a retry period — unless the old leader is predicted
 * to be released before they can try. Otherwise — and for every pod of anything else — it is admitted
 * unchanged. `s` must see the holders as they are now (the controller re-reads them), not as the informer last
 * saw them: the replacement is created milliseconds after the old pod's deletion.
 */
export function planAdmission(s: HandoverSnapshot, pod: V1Pod, early?: EarlyLift): AdmissionPlan {
  const dep = s.workloadOf(pod);
  if (!dep) return { gate: false, reason: 'not-managed', message: 'not a pod of a managed controller workload' };
  const pending = pendingHandovers(s, heldLeases(s, dep), s.now);
  if (pending.length === 0) return { gate: false, reason: 'no-handover-pending', message: `${workloadRef(dep)}: no lease is being handed over` };
  const described = describePending(pending);
  const earlyAt = earlyLiftFor(pending, early);
  if (earlyAt !== undefined && earlyAt <= s.now) {
    const message = overlapMessage(described);
    return { gate: false, reason: 'overlap', message, patch: statePatch(pod, `started: ${message}`) };
  }
  const message = waitingFor(described);
  const patch = gatePatch(pod, message);
  if (!patch) return { gate: false, reason: 'not-gateable', message: 'bound to a node at creation, or gated already' };
  return { gate: true, message, patch, earlyAt };
}

/**
 * Leader last (deletion costs by leases held) and the gate (hold new pods while a handover is pending, let them
 * go after it, or after the timeout in any case), for one managed Deployment.
 */
export function planWorkload(s: HandoverSnapshot, dep: V1Deployment, now: number, gateTimeoutMs: number, early?: EarlyLift): WorkloadPlan {
  const held = new Map<string, number>(); // pod uid → leases it holds
  const leases = heldLeases(s, dep);
  for (const { holder } of leases) {
    const uid = holder.pod.metadata?.uid ?? '';
    held.set(uid, (held.get(uid) ?? 0) + 1);
  }
  const pendingHolders = pendingHandovers(s, leases, now);
  // A pending lease that runs out ends its wait then (see pendingHandovers).
  const firstExpiry = Math.min(...pendingHolders.map(({ lease }) => expiresAt(lease) ?? Infinity));
  // Nothing pending only because leases ran out (pendingHandovers as if no lease had expired): said so on the lift.
  const ranOut = pendingHolders.length === 0 && pendingHandovers(s, leases, -Infinity).length > 0;
  const pending = describePending(pendingHolders);
  const earlyAt = earlyLiftFor(pendingHolders, early);
  const actions: PodAction[] = [];
  let requeue: number | undefined;
  for (const { pod, gone } of s.podsOf(dep)) {
    if (gone || pod.metadata?.deletionTimestamp) continue;
    // Leader last: only live, bound, non-terminating pods carry a cost.
    const cost = pod.spec?.nodeName ? deletionCostPatch(pod, held.get(pod.metadata?.uid ?? '') ?? 0) : undefined;
    if (cost) actions.push({ kind: 'set-deletion-cost', pod, patch: cost });
    if (!hasHandoverGate(pod)) continue;
    // The pod's handover state lives in an annotation, so a restarted operator resumes where it was.
    const state = pod.metadata?.annotations?.[HANDOVER_STATE];
    let decision: GateDecision = liftGateWhenNoHandoverPending(pod, pending, state !== undefined, now, gateTimeoutMs);
    if (!decision.lift && earlyAt !== undefined && earlyAt <= now) decision = { lift: true, reason: 'overlap', message: overlapMessage(pending) };
    if (decision.lift && decision.reason === 'handover-complete' && ranOut) {
      decision = {
        lift: true,
        reason: 'lease-expired',
        message: 'the old leader’s leases ran out without it being proven dead: starting; they go to whoever asks first, as without csi-handover',
      };
    }
    if (!decision.lift) {
      if (state !== decision.message)
        actions.push({ kind: 'hold', pod, message: decision.message, patch: { metadata: { annotations: { [HANDOVER_STATE]: decision.message } } } });
      const created = Date.parse(String(pod.metadata?.creationTimestamp ?? ''));
      const left = Number.isNaN(created) ? gateTimeoutMs : created + gateTimeoutMs - now;
      // Look again at the timeout, when a pending lease runs out, or when an early start becomes safe, whichever comes first.
      requeue = Math.min(
        requeue ?? Infinity,
        Math.max(100, left),
        Math.max(10, firstExpiry - now + 10),
        earlyAt === undefined ? Infinity : Math.max(10, earlyAt - now),
      );
      continue;
    }
    // A pod that waited keeps a record of how it was let go.
    const patch = liftGatePatch(pod, state === undefined ? undefined : `started: ${decision.message}`);
    if (!patch) continue;
    actions.push({
      kind: 'lift',
      pod,
      reason: decision.reason,
      message: decision.message,
      patch,
      warning: decision.reason === 'timeout' ? { reason: 'HandoverGateTimeout', message: decision.message } : undefined,
    });
  }
  return { pending, actions, requeueAfterMs: requeue };
}

/**
 * Fail open for good: the operator is going away (uninstalled, scaled to zero), so every pod still behind our gate
 * is let go, none waiting for an operator that will not come back. Each lift is test-and-remove.
 */
export function planOperatorLeaving(pods: readonly V1Pod[], why: string): PodAction[] {
  return pods.flatMap((pod): PodAction[] => {
    const patch = pod.metadata?.deletionTimestamp ? undefined : liftGatePatch(pod);
    return patch ? [{ kind: 'lift', pod, reason: 'operator-leaving', message: why, patch }] : [];
  });
}

/** Fail open: our gate on a pod no managed workload selects (its label was removed) is lifted at once. */
export function planOrphanGate(s: HandoverSnapshot, pod: V1Pod): PodAction | undefined {
  if (!hasHandoverGate(pod) || pod.metadata?.deletionTimestamp || s.workloadOf(pod)) return undefined;
  const patch = liftGatePatch(pod);
  return patch && { kind: 'lift', pod, reason: 'unmanaged', message: `${podRef(pod)}: its workload is not managed`, patch };
}

/**
 * What one version of a Lease says of its leadership term, for measuring: its holder, the pod renewing it, and
 * whether the empty holder is our release. `termPod`: the pod of the term as it stands (most versions are its
 * renewals: then nobody else is looked for).
 */
export function observeLease(s: HandoverSnapshot, lease: V1Lease, term: { holder: string; pod?: ObservedPod } | undefined): LeaseObservation {
  const holder = holderOf(lease);
  const namespace = lease.metadata?.namespace ?? '';
  const stillRuns = term?.holder === holder && term.pod !== undefined && s.mayRun(term.pod);
  const renewing = stillRuns ? term.pod : holder ? s.renewingPod({ namespace, identity: holder }) : undefined;
  const mark = parseKubeTime(lease.metadata?.annotations?.[RELEASED_BY_OPERATOR]);
  // A term first seen before its pod was (the lease informer synced first) learns its pod now, if the identity
  // names exactly one: without it the handover that ends the term has no stop, and so no gap.
  const named = term && term.pod === undefined && term.holder ? s.resolve({ namespace, identity: term.holder }) : undefined;
  return {
    holder,
    holderPod: renewing?.pod.metadata?.uid,
    termPod: named?.kind === 'pod' ? named.pod.pod.metadata?.uid : undefined,
    acquireTime: lease.spec?.acquireTime ? String(lease.spec.acquireTime) : undefined,
    releasedByOperator: holder === '' && mark !== undefined && mark === parseKubeTime(lease.spec?.renewTime),
  };
}

/** Whose handover it is: the driver of the workload of the pod that renews now (else the old holder's). */
export function handoverOwner(s: HandoverSnapshot, h: HandoverRecord): string | undefined {
  const pod = s.renewingPod({ namespace: h.namespace, identity: h.newHolder }) ?? s.renewingPod({ namespace: h.namespace, identity: h.oldHolder });
  return pod && s.workloadOf(pod.pod)?.metadata?.labels?.[DRIVER_LABEL];
}
