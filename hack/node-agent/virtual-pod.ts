// A pod with no processes (annotation csi-handover.io/virtual: "true"), so benchmarks can run thousands of
// pods on one machine. The agent reports it as it would a real one: init containers completed, containers
// running and ready at once; on deletion SIGTERM "sent", every container terminated with exit code 0, then
// the pod object deleted — the observable sequence of a real pod whose containers exit on SIGTERM.
import type { V1Pod } from '@kubernetes/client-node';
import type { ContainerView, PodView } from './pod-status.js';
import type { AgentEvent } from './pod-worker.js';

export const VIRTUAL_POD_ANNOTATION = 'csi-handover.io/virtual';

export const isVirtualPod = (pod: V1Pod): boolean => pod.metadata?.annotations?.[VIRTUAL_POD_ANNOTATION] === 'true';

export interface VirtualPodDeps {
  node: string;
  hostIP: string;
  podIP: string;
  record(e: AgentEvent): void;
  changed(): void;
}

export class VirtualPod {
  private readonly startTime = new Date();
  private readonly init: ContainerView[];
  private readonly containers: ContainerView[];
  private stopped = false;

  constructor(
    public pod: V1Pod,
    private readonly deps: VirtualPodDeps,
  ) {
    const waiting = (c: { name: string; image?: string }): ContainerView => ({
      name: c.name, image: c.image ?? '', state: { kind: 'waiting', reason: 'ContainerCreating' }, restartCount: 0,
    });
    this.init = (pod.spec?.initContainers ?? []).map(waiting);
    this.containers = (pod.spec?.containers ?? []).map(waiting);
  }

  get uid(): string {
    return this.pod.metadata?.uid ?? '';
  }

  view(): PodView {
    return { init: this.init, containers: this.containers, startTime: this.startTime, hostIP: this.deps.hostIP, podIP: this.deps.podIP };
  }

  isStopped(): boolean {
    return this.stopped;
  }

  private event(e: Omit<AgentEvent, 't' | 'node' | 'namespace' | 'pod' | 'uid'>): void {
    this.deps.record({
      t: new Date().toISOString(), node: this.deps.node, namespace: this.pod.metadata?.namespace ?? '', pod: this.pod.metadata?.name ?? '', uid: this.uid, ...e,
    });
  }

  start(): Promise<void> {
    const now = new Date();
    for (const c of this.init) c.state = { kind: 'terminated', exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now };
    for (const c of this.containers) c.state = { kind: 'running', startedAt: now, pid: 0 };
    this.event({ event: 'pod-started', detail: 'virtual: no processes' });
    this.deps.changed();
    return Promise.resolve();
  }

  /** Every container "exits" on SIGTERM at once, with code 0. */
  stop(_gracePeriodSeconds: number, why: string): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.stopped = true;
    const finishedAt = new Date();
    for (const c of [...this.init, ...this.containers]) {
      const s = c.state;
      if (s.kind === 'terminated') continue;
      if (s.kind === 'waiting') {
        c.state = { kind: 'terminated', exitCode: 0, reason: 'ContainerStatusUnknown', startedAt: this.startTime, finishedAt };
        continue;
      }
      this.event({ event: 'signal', container: c.name, signal: 'SIGTERM', detail: why });
      c.state = { kind: 'terminated', exitCode: 0, reason: 'Completed', startedAt: s.startedAt, finishedAt };
      this.event({ event: 'container-exited', container: c.name, exitCode: 0, signal: null });
    }
    this.event({ event: 'pod-stopped', detail: why });
    this.deps.changed();
    return Promise.resolve();
  }

  cleanup(): void {}
}
