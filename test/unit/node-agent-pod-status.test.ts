import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { type ContainerView, podPhase, podStatus, type PodView } from '../../hack/node-agent/pod-status.js';

const t0 = new Date('2026-01-01T00:00:00Z');
const running = (name: string, probeReady?: boolean): ContainerView => ({
  name, image: 'img', restartCount: 0, state: { kind: 'running', startedAt: t0, pid: 42 }, probeReady,
});
const exited = (name: string, exitCode: number): ContainerView => ({
  name, image: 'img', restartCount: 1, state: { kind: 'terminated', exitCode, startedAt: t0, finishedAt: t0, reason: exitCode ? 'Error' : 'Completed' },
});
const waiting = (name: string, reason = 'ContainerCreating'): ContainerView => ({
  name, image: 'img', restartCount: 0, state: { kind: 'waiting', reason },
});
const view = (containers: ContainerView[], init: ContainerView[] = []): PodView => ({
  init, containers, startTime: t0, hostIP: '127.0.0.1', podIP: '127.0.0.1',
});

describe('podPhase', () => {
  it.each([
    ['all waiting', view([waiting('a'), waiting('b')]), 'Always', 'Pending'],
    ['one running', view([running('a'), waiting('b')]), 'Always', 'Running'],
    ['all running', view([running('a'), running('b')]), 'Always', 'Running'],
    ['all exited 0, Always restarts', view([exited('a', 0)]), 'Always', 'Running'],
    ['all exited 0, Never', view([exited('a', 0)]), 'Never', 'Succeeded'],
    ['one failed, Never', view([exited('a', 0), exited('b', 1)]), 'Never', 'Failed'],
    ['one failed, OnFailure restarts', view([exited('a', 1)]), 'OnFailure', 'Running'],
    ['init still running', view([waiting('a')], [running('i')]), 'Always', 'Pending'],
    ['init failed, Never', view([waiting('a')], [exited('i', 1)]), 'Never', 'Failed'],
    ['init done', view([running('a')], [exited('i', 0)]), 'Always', 'Running'],
  ] as const)('%s → %s', (_name, v, policy, phase) => expect(podPhase(v, policy)).toBe(phase));
});

describe('podStatus', () => {
  const pod: V1Pod = { metadata: { name: 'p' }, spec: { containers: [] } };
  const cond = (s: ReturnType<typeof podStatus>, type: string) => s.conditions?.find((c) => c.type === type)?.status;

  it('is Ready only when every container runs and passes its probe', () => {
    expect(cond(podStatus(pod, view([running('a'), running('b')]), t0), 'Ready')).toBe('True');
    expect(cond(podStatus(pod, view([running('a'), running('b', false)]), t0), 'Ready')).toBe('False');
    expect(cond(podStatus(pod, view([running('a'), waiting('b', 'CrashLoopBackOff')]), t0), 'Ready')).toBe('False');
  });

  it('reports exit codes, signals and restart counts per container', () => {
    const v = view([{ ...exited('a', 137), state: { kind: 'terminated', exitCode: 137, signal: 'SIGKILL', startedAt: t0, finishedAt: t0, reason: 'Error' } }]);
    const s = podStatus(pod, v, t0).containerStatuses?.[0];
    expect(s?.state?.terminated?.exitCode).toBe(137);
    expect(s?.state?.terminated?.signal).toBe(9);
    expect(s?.restartCount).toBe(1);
    expect(s?.ready).toBe(false);
  });

  it('keeps lastTransitionTime while a condition does not change', () => {
    const first = podStatus(pod, view([running('a')]), t0);
    const later = new Date(t0.getTime() + 60_000);
    const second = podStatus(pod, view([running('a')]), later, first);
    expect(second.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime).toEqual(t0);
    const third = podStatus(pod, view([waiting('a')]), later, second);
    expect(third.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime).toEqual(later);
  });
});
