// Is every container of a pod being deleted gone, by the kernel's account? A pure decision over what the witness
// read; anything it cannot tell for sure proves nothing, and the operator falls back to the kubelet's report.
import type { V1Pod } from '@kubernetes/client-node';
import { DELETION_COST } from '../handover/deletion-cost.js';
import { type ChildCgroup, kindKey, type PodCgroupReading } from './cgroups.js';
import type { CgroupKind } from './runtime.js';

export type Judgement = { proven: true; exitedBy: number; detail: string } | { proven: false; why: string };

/**
 * The pods the witness watches for: leaders (the operator's deletion cost) in a graceful deletion. A
 * containers-exited condition already on the pod does not count: someone else may have written it (any writer of
 * pods/status where the admission policy is not in force, a time the operator refuses), and it would silence the
 * one witness whose word the operator takes. The witness remembers what it wrote itself (Witness).
 */
export function wantsWitness(pod: V1Pod, leaderCost: string): boolean {
  const m = pod.metadata;
  if (m?.deletionTimestamp == null || !(typeof m.deletionGracePeriodSeconds === 'number' && m.deletionGracePeriodSeconds > 0)) return false;
  return m.annotations?.[DELETION_COST] === leaderCost;
}

const short = (id: string): string => id.slice(0, 12);

/**
 * Whether a live child may be left running: the sandbox's own cgroup, or a monitor of this pod's container or
 * sandbox. The kind must fit the role: a kind learnt for a container's cgroup says nothing of its conmon's, nor back.
 */
function ignorable(c: ChildCgroup, kind: CgroupKind | undefined): boolean {
  return c.role === 'monitor' ? kind === 'monitor-of-this-pod' : kind === 'sandbox';
}

/** `kinds` classifies, by kindKey, the children that still have processes (the others need no classifying). */
export function judge(reading: PodCgroupReading, kinds: ReadonlyMap<string, CgroupKind | undefined>): Judgement {
  if (!reading.found) return { proven: false, why: `no cgroup for the pod (looked in ${reading.looked.length} places): gone already, or another layout` };
  const kindOf = (c: ChildCgroup) => kinds.get(kindKey(c));
  const live = reading.children.filter((c) => c.tasks > 0);
  // A container blocks on its own cgroup, whatever is known of its conmon's.
  const containers = live.filter((c) => c.role === 'workload' && kindOf(c) === 'container');
  if (containers.length > 0) {
    const c = containers[0];
    return {
      proven: false,
      why: `container ${short(c?.id ?? '')} has ${c?.tasks ?? 0} process(es) left${containers.length > 1 ? ` (and ${containers.length - 1} more)` : ''}`,
    };
  }
  const unknown = live.find((c) => !ignorable(c, kindOf(c)));
  if (unknown?.role === 'monitor') {
    return { proven: false, why: `the monitor (conmon) cgroup of ${short(unknown.id)} has processes and no runtime bundle of that id names this pod` };
  }
  if (unknown) return { proven: false, why: `cgroup ${short(unknown.id)} has processes and its runtime bundle does not say it is the sandbox` };
  const exited = reading.children.filter((c) => c.role === 'workload' && c.tasks === 0).length;
  const sandbox = live.find((c) => c.role === 'workload');
  const monitors = live.filter((c) => c.role === 'monitor').length;
  return {
    proven: true,
    exitedBy: reading.listedAt,
    detail: [
      `${exited} container cgroup(s) empty`,
      sandbox ? `the sandbox ${short(sandbox.id)} still runs` : 'no sandbox process left',
      ...(monitors > 0 ? [`${monitors} monitor (conmon) cgroup(s) still live, ignored`] : []),
    ].join(', '),
  };
}
