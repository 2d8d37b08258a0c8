import type { V1ContainerState, V1ContainerStatus, V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { ObservedPod } from '../../src/handover/observed-pod.js';
import { containersFinishedAt, type DeathVerdict, provenDead } from '../../src/handover/proven-dead.js';
import { witnessCondition } from '../../src/handover/witness-evidence.js';

const T0 = Date.parse('2026-01-02T03:04:05Z');

type State = 'running' | 'terminated' | 'crashloop' | 'no-status';

const states: Record<Exclude<State, 'no-status'>, V1ContainerState> = {
  running: { running: { startedAt: new Date(T0) } },
  terminated: { terminated: { exitCode: 0, reason: 'Completed', finishedAt: new Date(T0) } },
  crashloop: { waiting: { reason: 'CrashLoopBackOff' } },
};

const statusesOf = (containers: Record<string, State>): V1ContainerStatus[] =>
  Object.entries(containers).flatMap(([name, s]) =>
    s === 'no-status' ? [] : [{ name, image: 'img', imageID: '', ready: s === 'running', restartCount: 0, state: structuredClone(states[s]) }],
  );

interface Shape {
  containers?: Record<string, State>;
  /** Native sidecars: init containers with restartPolicy Always. */
  sidecars?: Record<string, State>;
  init?: Record<string, State>;
  ephemeral?: Record<string, State>;
  phase?: string;
  /** deletionGracePeriodSeconds of the last observed state; absent: not being deleted. */
  deletionGrace?: number;
  node?: string | null;
  gone?: boolean;
  gracefulDeletionSeconds?: number;
  /** The node witness's evidence: the node it names (the pod's own, 'ready', unless said otherwise). */
  witness?: string;
  /** The witness's condition is on the pod but was never accepted (no policy in force, out of bounds, …). */
  witnessUnjudged?: boolean;
}

function observed(s: Shape): ObservedPod {
  const containers = s.containers ?? { 'csi-provisioner': 'terminated', 'csi-attacher': 'terminated' };
  const pod: V1Pod = {
    metadata: {
      name: 'ctrl-abc',
      namespace: 'csi',
      uid: 'u1',
      ...(s.deletionGrace !== undefined ? { deletionTimestamp: new Date(T0), deletionGracePeriodSeconds: s.deletionGrace } : {}),
    },
    spec: {
      nodeName: s.node === null ? undefined : (s.node ?? 'ready'),
      containers: Object.keys(containers).map((name) => ({ name })),
      initContainers: [
        ...Object.keys(s.init ?? {}).map((name) => ({ name })),
        ...Object.keys(s.sidecars ?? {}).map((name) => ({ name, restartPolicy: 'Always' })),
      ],
    },
    status: {
      phase: s.phase ?? 'Running',
      containerStatuses: statusesOf(containers),
      initContainerStatuses: statusesOf({ ...s.init, ...s.sidecars }),
      ephemeralContainerStatuses: statusesOf(s.ephemeral ?? {}),
      ...(s.witness !== undefined ? { conditions: [witnessCondition({ exitedBy: T0 + 250, node: s.witness }, 'test', T0 + 300)] } : {}),
    },
  };
  return {
    pod,
    gone: s.gone ?? false,
    ...(s.gone ? { goneAt: T0 + 5_000 } : {}),
    ...(s.gracefulDeletionSeconds !== undefined ? { gracefulDeletionSeconds: s.gracefulDeletionSeconds } : {}),
    // Evidence counts once accepted at intake (judgeEvidence); a condition alone is only what someone wrote.
    ...(s.witness !== undefined && !s.witnessUnjudged ? { witnessed: { exitedBy: T0 + 250, node: s.witness } } : {}),
  };
}

const node = (name: string, ready: string): V1Node => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status: ready }] } });
const nodes = new Map([node('ready', 'True'), node('notready', 'False'), node('unreachable', 'Unknown')].map((n) => [n.metadata?.name ?? '', n]));

const verdict = (v: DeathVerdict): string => (v.dead ? `dead ${v.evidence}` : `alive ${v.reason}`);

const allTerminated = { 'csi-provisioner': 'terminated', 'csi-attacher': 'terminated' } as const;
const oneRunning = { 'csi-provisioner': 'terminated', 'csi-attacher': 'running' } as const;

describe('provenDead', () => {
  it.each<[string, Shape, string]>([
    // The pod object is gone (a tombstone): judged on its last observed state.
    [
      'gone after a graceful deletion with all containers terminated',
      { gone: true, deletionGrace: 30, containers: allTerminated },
      'dead deleted-after-containers-terminated',
    ],
    [
      'gone: the kubelet’s final delete left grace 0, a graceful deletion was seen before',
      { gone: true, deletionGrace: 0, gracefulDeletionSeconds: 30, containers: allTerminated },
      'dead deleted-after-containers-terminated',
    ],
    ['gone while a container was running (force-deleted)', { gone: true, deletionGrace: 30, containers: oneRunning }, 'alive force-deleted'],
    ['gone with grace 0 while running', { gone: true, deletionGrace: 0, containers: oneRunning }, 'alive force-deleted'],
    ['gone with grace 0, all terminated, no graceful deletion seen', { gone: true, deletionGrace: 0, containers: allTerminated }, 'alive force-deleted'],
    ['gone without a deletionTimestamp ever observed', { gone: true, containers: allTerminated }, 'alive force-deleted'],
    ['gone while a container was waiting to restart', { gone: true, deletionGrace: 30, containers: { 'csi-provisioner': 'crashloop' } }, 'alive force-deleted'],
    [
      'gone while an init container was still running',
      { gone: true, deletionGrace: 30, containers: allTerminated, init: { setup: 'running' } },
      'alive force-deleted',
    ],
    [
      'gone, a container never reported a state',
      { gone: true, deletionGrace: 30, containers: { 'csi-provisioner': 'terminated', 'csi-attacher': 'no-status' } },
      'alive status-unknown',
    ],
    ['gone, last seen Succeeded', { gone: true, phase: 'Succeeded', containers: allTerminated }, 'dead pod-phase-terminal'],
    // The pod is still there.
    ['phase Failed', { phase: 'Failed', containers: allTerminated }, 'dead pod-phase-terminal'],
    ['node NotReady, containers running', { node: 'notready', containers: oneRunning }, 'alive node-not-ready'],
    ['node NotReady, phase Succeeded', { node: 'notready', phase: 'Succeeded', containers: allTerminated }, 'dead pod-phase-terminal'],
    ['node NotReady, all terminated during a graceful deletion', { node: 'notready', deletionGrace: 30, containers: allTerminated }, 'alive node-not-ready'],
    ['node unreachable (Ready Unknown)', { node: 'unreachable', deletionGrace: 30, containers: allTerminated }, 'alive node-not-ready'],
    ['node not observed', { node: 'elsewhere', deletionGrace: 30, containers: allTerminated }, 'alive node-not-ready'],
    ['not bound to a node', { node: null, containers: { 'csi-provisioner': 'no-status' } }, 'alive node-not-ready'],
    ['all terminated on a Ready node during a graceful deletion', { deletionGrace: 30, containers: allTerminated }, 'dead containers-terminated'],
    [
      'all terminated after the kubelet set grace 0, graceful deletion seen',
      { deletionGrace: 0, gracefulDeletionSeconds: 30, containers: allTerminated },
      'dead containers-terminated',
    ],
    ['all terminated but not being deleted: the kubelet restarts them', { containers: allTerminated }, 'alive not-terminating'],
    ['all terminated, being force-deleted', { deletionGrace: 0, containers: allTerminated }, 'alive force-deleted'],
    ['one container still running', { deletionGrace: 30, containers: oneRunning }, 'alive containers-running'],
    ['waiting in CrashLoopBackOff', { containers: { 'csi-provisioner': 'terminated', 'csi-attacher': 'crashloop' } }, 'alive containers-running'],
    ['no container statuses', { deletionGrace: 30, containers: { 'csi-provisioner': 'no-status', 'csi-attacher': 'no-status' } }, 'alive status-unknown'],
    [
      'a native sidecar (restartable init container) still running',
      { deletionGrace: 30, containers: allTerminated, sidecars: { 'csi-resizer': 'running' } },
      'alive containers-running',
    ],
    [
      'a native sidecar that never reported',
      { deletionGrace: 30, containers: allTerminated, sidecars: { 'csi-resizer': 'no-status' } },
      'alive status-unknown',
    ],
    [
      'a completed ordinary init container does not matter',
      { deletionGrace: 30, containers: allTerminated, init: { setup: 'terminated' } },
      'dead containers-terminated',
    ],
    ['an ephemeral debug container running', { deletionGrace: 30, containers: allTerminated, ephemeral: { debugger: 'running' } }, 'alive containers-running'],
    // The node witness: trusted in a graceful deletion on a Ready node, for its own node's pods only.
    [
      'witness: every container exited, the kubelet still says running',
      { deletionGrace: 30, containers: oneRunning, witness: 'ready' },
      'dead witness-saw-containers-exit',
    ],
    [
      'witness: gone after a graceful deletion it witnessed',
      { gone: true, deletionGrace: 30, containers: oneRunning, witness: 'ready' },
      'dead witness-saw-containers-exit',
    ],
    [
      'witness: its condition on the pod, not accepted at intake (anyone with pods/status could have written it)',
      { deletionGrace: 30, containers: oneRunning, witness: 'ready', witnessUnjudged: true },
      'alive containers-running',
    ],
    ['witness: evidence naming another node', { deletionGrace: 30, containers: oneRunning, witness: 'other' }, 'alive containers-running'],
    ['witness: the pod is not being deleted', { containers: oneRunning, witness: 'ready' }, 'alive containers-running'],
    ['witness: force deletion (grace 0)', { deletionGrace: 0, containers: oneRunning, witness: 'ready' }, 'alive containers-running'],
    ['witness: gone by a force deletion', { gone: true, deletionGrace: 0, containers: oneRunning, witness: 'ready' }, 'alive force-deleted'],
    ['witness: node NotReady', { node: 'notready', deletionGrace: 30, containers: oneRunning, witness: 'notready' }, 'alive node-not-ready'],
  ])('%s', (_case, shape, want) => {
    expect(verdict(provenDead(observed(shape), nodes))).toBe(want);
  });

  it('says in the message which container keeps the pod from being proven dead, and why', () => {
    const v = provenDead(observed({ containers: { 'csi-attacher': 'crashloop' } }), nodes);
    expect(v.message).toMatch(/csi\/ctrl-abc: container csi-attacher is waiting \(CrashLoopBackOff\)/);
  });
});

describe('containersFinishedAt', () => {
  const finishedAt = (times: unknown[]): V1Pod => {
    const pod = observed({ containers: Object.fromEntries(times.map((_, i) => [`c${i}`, 'terminated' as const])) }).pod;
    // Watch events carry times as strings, typed clients as Dates: both occur.
    pod.status?.containerStatuses?.forEach((c, i) => {
      if (c.state?.terminated) c.state.terminated.finishedAt = times[i] as Date;
    });
    return pod;
  };
  it.each<[string, V1Pod, number | undefined]>([
    ['the last finish, from wire strings and Dates alike', finishedAt(['2026-01-02T03:04:07Z', new Date(T0)]), T0 + 2_000],
    ['no container reports a finish', finishedAt([undefined]), undefined],
    ['no container terminated', observed({ containers: { c: 'running' } }).pod, undefined],
  ])('%s', (_case, pod, want) => {
    expect(containersFinishedAt(pod)).toBe(want);
  });
});
