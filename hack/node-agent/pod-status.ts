// Pure computation of a pod's status from the node agent's view of its containers, as the kubelet reports
// it: phase, conditions, per-container state with exit codes and restart counts.
import type { V1ContainerStatus, V1Pod, V1PodCondition, V1PodStatus } from '@kubernetes/client-node';

export type ContainerState =
  | { kind: 'waiting'; reason: string; message?: string }
  | { kind: 'running'; startedAt: Date; pid: number }
  | { kind: 'terminated'; exitCode: number; signal?: string; startedAt: Date; finishedAt: Date; reason: string };

export interface ContainerView {
  name: string;
  image: string;
  state: ContainerState;
  lastTerminated?: Extract<ContainerState, { kind: 'terminated' }>;
  restartCount: number;
  /** Readiness from a probe, when the container has one; otherwise running means ready. */
  probeReady?: boolean;
}

export interface PodView {
  init: ContainerView[];
  containers: ContainerView[];
  startTime: Date;
  hostIP: string;
  podIP: string;
}

const iso = (d: Date): string => d.toISOString();

function k8sState(s: ContainerState): V1ContainerStatus['state'] {
  switch (s.kind) {
    case 'waiting':
      return { waiting: { reason: s.reason, message: s.message } };
    case 'running':
      return { running: { startedAt: s.startedAt } };
    case 'terminated':
      return {
        terminated: {
          exitCode: s.exitCode,
          reason: s.reason,
          signal: s.signal ? signalNumber(s.signal) : undefined,
          startedAt: s.startedAt,
          finishedAt: s.finishedAt,
          containerID: undefined,
        },
      };
  }
}

function signalNumber(name: string): number | undefined {
  return ({ SIGTERM: 15, SIGKILL: 9, SIGINT: 2, SIGHUP: 1, SIGABRT: 6, SIGSEGV: 11 } as Record<string, number>)[name];
}

function isReady(c: ContainerView): boolean {
  return c.state.kind === 'running' && (c.probeReady ?? true);
}

function containerStatus(c: ContainerView): V1ContainerStatus {
  return {
    name: c.name,
    image: c.image,
    imageID: `local://${c.image}`,
    containerID: c.state.kind === 'running' ? `process://${c.state.pid}` : undefined,
    ready: isReady(c),
    started: c.state.kind === 'running',
    restartCount: c.restartCount,
    state: k8sState(c.state),
    lastState: c.lastTerminated ? k8sState(c.lastTerminated) : {},
  };
}

export type RestartPolicy = 'Always' | 'OnFailure' | 'Never';

/** Pod phase by the kubelet's rules (pkg/kubelet/kubelet_pods.go getPhase), for regular containers. */
export function podPhase(view: PodView, restartPolicy: RestartPolicy): V1PodStatus['phase'] {
  const initDone = view.init.every((c) => c.state.kind === 'terminated' && c.state.exitCode === 0);
  if (!initDone) {
    const failedInit = view.init.some((c) => c.state.kind === 'terminated' && c.state.exitCode !== 0);
    return failedInit && restartPolicy === 'Never' ? 'Failed' : 'Pending';
  }
  const cs = view.containers;
  const running = cs.filter((c) => c.state.kind === 'running').length;
  const waiting = cs.filter((c) => c.state.kind === 'waiting').length;
  const terminated = cs.filter((c) => c.state.kind === 'terminated');
  const succeeded = terminated.filter((c) => c.state.kind === 'terminated' && c.state.exitCode === 0).length;
  const failed = terminated.length - succeeded;
  if (waiting > 0 && running === 0 && terminated.length === 0) return 'Pending';
  if (running > 0 || waiting > 0) return 'Running';
  // Every container has terminated.
  if (restartPolicy === 'Always') return 'Running';
  if (failed > 0) return restartPolicy === 'Never' ? 'Failed' : 'Running';
  return 'Succeeded';
}

export function podStatus(pod: V1Pod, view: PodView, now: Date, previous?: V1PodStatus): V1PodStatus {
  const restartPolicy = (pod.spec?.restartPolicy ?? 'Always') as RestartPolicy;
  const phase = podPhase(view, restartPolicy);
  const initialized = view.init.every((c) => c.state.kind === 'terminated' && c.state.exitCode === 0);
  const containersReady = initialized && view.containers.every(isReady);
  const condition = (type: string, ok: boolean, reason?: string): V1PodCondition => {
    const prev = previous?.conditions?.find((c) => c.type === type);
    const status = ok ? 'True' : 'False';
    return {
      type,
      status,
      reason: ok ? undefined : reason,
      lastTransitionTime: prev && prev.status === status && prev.lastTransitionTime ? prev.lastTransitionTime : now,
      lastProbeTime: undefined,
    };
  };
  const sandboxUp = phase === 'Pending' || phase === 'Running';
  return {
    phase,
    conditions: [
      condition('PodReadyToStartContainers', sandboxUp),
      condition('Initialized', initialized, 'ContainersNotInitialized'),
      condition('Ready', containersReady, 'ContainersNotReady'),
      condition('ContainersReady', containersReady, 'ContainersNotReady'),
      condition('PodScheduled', true),
    ],
    hostIP: view.hostIP,
    hostIPs: [{ ip: view.hostIP }],
    podIP: view.podIP,
    podIPs: [{ ip: view.podIP }],
    startTime: view.startTime,
    initContainerStatuses: view.init.length ? view.init.map(containerStatus) : undefined,
    containerStatuses: view.containers.map(containerStatus),
    qosClass: previous?.qosClass,
  };
}

/** JSON shape for the status patch, with Dates as RFC 3339 strings as the API expects. */
export function toWire(status: V1PodStatus): unknown {
  return JSON.parse(JSON.stringify(status, (_k, v: unknown) => (v instanceof Date ? iso(v) : v)));
}
