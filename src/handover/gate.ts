// New pods start after the release: while a handover is pending, the admission webhook adds a scheduling gate to
// a new pod of the workload (gatePatch), and the pod is let go (liftGatePatch) as soon as no lease of its workload
// is held by a terminating pod that is still alive. Fail open: a gate older than the timeout is lifted anyway.
// Older versions put the gate into the pod template; `withHandoverGate` takes it out again.
import type { V1Pod, V1PodSpec } from '@kubernetes/client-node';
import { HANDOVER_GATE, HANDOVER_STATE } from '../api/names.js';

const escapePointer = (s: string): string => s.replaceAll('~', '~0').replaceAll('/', '~1');

export const specHasHandoverGate = (spec: V1PodSpec | undefined): boolean => (spec?.schedulingGates ?? []).some((g) => g.name === HANDOVER_GATE);
export const hasHandoverGate = (pod: V1Pod): boolean => specHasHandoverGate(pod.spec);

export type GateDecision =
  | { lift: false; reason: 'handover-pending'; message: string }
  | { lift: true; reason: 'no-handover-pending' | 'handover-complete' | 'lease-expired' | 'timeout' | 'overlap'; message: string };

/** What a held-back pod waits for, as its state annotation says it. */
export const waitingFor = (pendingHolders: readonly string[]): string => `waiting for ${pendingHolders.join(', ')}`;

/**
 * `pendingHolders`: the workload's leases still held by a terminating pod that is not proven dead, as
 * "lease ← pod". `waitedBefore`: this pod was already held back once (so lifting now follows a handover).
 */
export function liftGateWhenNoHandoverPending(
  pod: V1Pod,
  pendingHolders: readonly string[],
  waitedBefore: boolean,
  now: number,
  timeoutMs: number,
): GateDecision {
  const created = Date.parse(String(pod.metadata?.creationTimestamp ?? ''));
  const ageMs = Number.isNaN(created) ? 0 : now - created;
  if (pendingHolders.length === 0) {
    return waitedBefore
      ? { lift: true, reason: 'handover-complete', message: 'the old leader released its leases' }
      : { lift: true, reason: 'no-handover-pending', message: 'no lease of this workload is being handed over' };
  }
  if (ageMs >= timeoutMs) {
    return {
      lift: true,
      reason: 'timeout',
      message: `gate held ${Math.round(ageMs / 1000)}s, longer than ${Math.round(timeoutMs / 1000)}s, while waiting for ${pendingHolders.join(', ')}: starting anyway; the lease will expire as it always did`,
    };
  }
  return { lift: false, reason: 'handover-pending', message: waitingFor(pendingHolders) };
}

/** The pod spec with the gate present or absent; the same object when nothing changes. */
export function withHandoverGate(spec: V1PodSpec, present: boolean): V1PodSpec {
  const gates = spec.schedulingGates ?? [];
  if (specHasHandoverGate(spec) === present) return spec;
  const next = present ? [...gates, { name: HANDOVER_GATE }] : gates.filter((g) => g.name !== HANDOVER_GATE);
  return { ...spec, schedulingGates: next.length ? next : undefined };
}

/**
 * A JSON patch that removes our gate only if it is still where we saw it (test-and-remove); `state`: the state
 * annotation the pod had while held back is replaced with it (how it was let go).
 */
export function liftGatePatch(pod: V1Pod, state?: string): unknown[] | undefined {
  const i = (pod.spec?.schedulingGates ?? []).findIndex((g) => g.name === HANDOVER_GATE);
  if (i < 0) return undefined;
  return [
    { op: 'test', path: `/spec/schedulingGates/${i}/name`, value: HANDOVER_GATE },
    { op: 'remove', path: `/spec/schedulingGates/${i}` },
    ...(state === undefined ? [] : [{ op: 'replace', path: `/metadata/annotations/${escapePointer(HANDOVER_STATE)}`, value: state }]),
  ];
}

/** Sets the state annotation only (a pod admitted ungated while a handover is pending says why). */
export function statePatch(pod: V1Pod, state: string): unknown[] {
  return pod.metadata?.annotations
    ? [{ op: 'add', path: `/metadata/annotations/${escapePointer(HANDOVER_STATE)}`, value: state }]
    : [{ op: 'add', path: '/metadata/annotations', value: { [HANDOVER_STATE]: state } }];
}

/**
 * Adds the gate and the state annotation. `undefined` for a pod the gate cannot apply to: one created bound to
 * a node (the API server forbids scheduling gates there) or already gated by us.
 */
export function gatePatch(pod: V1Pod, message: string): unknown[] | undefined {
  if (pod.spec?.nodeName) return undefined;
  const gates = pod.spec?.schedulingGates;
  if (gates?.some((g) => g.name === HANDOVER_GATE)) return undefined;
  const ops = [
    gates
      ? { op: 'add', path: '/spec/schedulingGates/-', value: { name: HANDOVER_GATE } }
      : { op: 'add', path: '/spec/schedulingGates', value: [{ name: HANDOVER_GATE }] },
  ];
  return [...ops, ...statePatch(pod, message)];
}
