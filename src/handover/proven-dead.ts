// Proven dead: may we treat a lease holder's pod as no longer running anything that could act on the lease?
// Only on positive evidence from the kubelet, a finished graceful deletion, or the witness of the pod's own node
// (the kernel's view of its container cgroups, src/witness). Everything else (force deletions, silent nodes,
// containers that may restart) is "not proven", and the lease expires as it always did.
import { readyCondition } from './ready.js';
import type { V1ContainerStatus, V1Node, V1Pod } from '@kubernetes/client-node';
import { parseKubeTime } from './kube-time.js';
import { gracefulDeletionSeconds, type ObservedPod, podRef, witnessOf } from './observed-pod.js';

/** What a holder's death can rest on. */
export const DEATH_EVIDENCE = ['deleted-after-containers-terminated', 'containers-terminated', 'pod-phase-terminal', 'witness-saw-containers-exit'] as const;

export type DeathVerdict =
  | { dead: true; evidence: (typeof DEATH_EVIDENCE)[number]; message: string }
  | { dead: false; reason: 'containers-running' | 'force-deleted' | 'node-not-ready' | 'status-unknown' | 'not-terminating'; message: string };

type NotDeadReason = Extract<DeathVerdict, { dead: false }>['reason'];

/** What the last observed status says of the containers that could hold the lease. */
type ContainerActivity =
  | { kind: 'all-terminated' }
  | { kind: 'running'; container: string }
  | { kind: 'waiting'; container: string; why: string }
  | { kind: 'unknown'; container: string };

interface LeaseCapableContainer {
  name: string;
  status: V1ContainerStatus | undefined;
}

/** Regular containers and native sidecars (restartable init containers): the ones that run alongside the app. */
export function leaseCapableContainers(pod: V1Pod): LeaseCapableContainer[] {
  const status = pod.status;
  return [
    ...(pod.spec?.containers ?? []).map((c) => ({ name: c.name, status: status?.containerStatuses?.find((s) => s.name === c.name) })),
    ...(pod.spec?.initContainers ?? [])
      .filter((c) => c.restartPolicy === 'Always')
      .map((c) => ({ name: c.name, status: status?.initContainerStatuses?.find((s) => s.name === c.name) })),
  ];
}

function containerActivity(pod: V1Pod): ContainerActivity {
  const s = pod.status;
  // Any process still running in the pod (an init or ephemeral container too) rules out death.
  const running = [...(s?.containerStatuses ?? []), ...(s?.initContainerStatuses ?? []), ...(s?.ephemeralContainerStatuses ?? [])].find(
    (c) => c.state?.running != null,
  );
  if (running) return { kind: 'running', container: running.name };
  const capable = leaseCapableContainers(pod);
  if (capable.length === 0) return { kind: 'unknown', container: '(none in spec)' };
  const waiting = capable.find((c) => c.status?.state?.waiting != null);
  if (waiting) return { kind: 'waiting', container: waiting.name, why: waiting.status?.state?.waiting?.reason ?? 'no reason given' };
  const unreported = capable.find((c) => c.status?.state?.terminated == null);
  if (unreported) return { kind: 'unknown', container: unreported.name };
  return { kind: 'all-terminated' };
}

/**
 * When the last lease-capable container finished, on the clock of the pod's node (which is also the clock the
 * holder stamped its renewTime with); undefined if no container reports it.
 */
export function containersFinishedAt(pod: V1Pod): number | undefined {
  const finished = leaseCapableContainers(pod)
    .map((c) => parseKubeTime(c.status?.state?.terminated?.finishedAt))
    .filter((t): t is number => t !== undefined);
  return finished.length > 0 ? Math.max(...finished) : undefined;
}

/** Why the pod's node cannot be trusted to report its containers, or undefined when it is Ready. */
function nodeNotReady(pod: V1Pod, nodes: ReadonlyMap<string, V1Node>): string | undefined {
  const nodeName = pod.spec?.nodeName;
  if (!nodeName) return 'it is not bound to a node';
  const node = nodes.get(nodeName);
  if (!node) return `its node ${nodeName} is not observed`;
  const ready = readyCondition(node);
  if (ready?.status !== 'True') return `its node ${nodeName} is not Ready (Ready=${ready?.status ?? 'absent'})`;
  return undefined;
}

function notDead(reason: NotDeadReason, message: string): DeathVerdict {
  return { dead: false, reason, message };
}

/** Death as the witness of the pod's own node saw it, if it did; the caller has checked the deletion is graceful. */
function byWitness(p: ObservedPod): DeathVerdict | undefined {
  const { pod } = p;
  const w = witnessOf(p);
  // Evidence naming another node is not this pod's: the admission policy refuses such a write, so it is a fault.
  if (!w || w.node !== pod.spec?.nodeName) return undefined;
  return {
    dead: true,
    evidence: 'witness-saw-containers-exit',
    message: `${podRef(pod)} is being deleted and the witness on ${w.node} saw every container exit by ${new Date(w.exitedBy).toISOString()}`,
  };
}

export function provenDead(p: ObservedPod, nodes: ReadonlyMap<string, V1Node>): DeathVerdict {
  const { pod } = p;
  const ref = podRef(pod);
  const phase = pod.status?.phase;
  // A terminal phase is final: the kubelet reported every container finished and will not restart any.
  if (phase === 'Succeeded' || phase === 'Failed') {
    return { dead: true, evidence: 'pod-phase-terminal', message: `${ref} is ${phase}: the kubelet reported every container finished` };
  }
  const activity = containerActivity(pod);
  const deleting = pod.metadata?.deletionTimestamp != null;
  const graceful = gracefulDeletionSeconds(p) !== undefined;

  if (p.gone) {
    if (!deleting) return notDead('force-deleted', `${ref} was deleted without a graceful deletion ever observed`);
    if (!graceful)
      return notDead('force-deleted', `${ref} was deleted with grace period 0 and no graceful deletion observed before: its processes may still run`);
    const witnessed = byWitness(p);
    if (witnessed) return witnessed;
    switch (activity.kind) {
      case 'running':
      case 'waiting':
        return notDead('force-deleted', `${ref} was deleted while container ${activity.container} was still ${activity.kind}: its processes may still run`);
      case 'unknown':
        return notDead('status-unknown', `${ref} was deleted, and container ${activity.container} never reported terminated`);
      case 'all-terminated':
        return {
          dead: true,
          evidence: 'deleted-after-containers-terminated',
          message: `${ref} was deleted after a graceful deletion in which the kubelet reported every container terminated`,
        };
    }
  }

  // A silent kubelet may have stopped reporting while its containers run on.
  const nodeProblem = nodeNotReady(pod, nodes);
  if (nodeProblem) return notDead('node-not-ready', `${ref}: ${nodeProblem}, so its containers may still run`);
  // The witness reports before the kubelet does (which stops the sandbox first): trusted in a graceful deletion only.
  if (deleting && graceful) {
    const witnessed = byWitness(p);
    if (witnessed) return witnessed;
  }
  switch (activity.kind) {
    case 'running':
      return notDead('containers-running', `${ref}: container ${activity.container} is running`);
    case 'waiting':
      return notDead('containers-running', `${ref}: container ${activity.container} is waiting (${activity.why}) and may start again under the same identity`);
    case 'unknown':
      return notDead('status-unknown', `${ref}: container ${activity.container} has not reported a state`);
    case 'all-terminated':
      // Outside a deletion the kubelet restarts them, under the same hostname and so the same identity.
      if (!deleting) return notDead('not-terminating', `${ref}: every container has terminated, but the pod is not being deleted and they may be restarted`);
      if (!graceful) return notDead('force-deleted', `${ref} is being deleted with grace period 0 and no graceful deletion was observed before`);
      return { dead: true, evidence: 'containers-terminated', message: `${ref} is being deleted and the kubelet reported every container terminated` };
  }
}
