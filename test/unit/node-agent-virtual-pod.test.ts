import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { podStatus } from '../../hack/node-agent/pod-status.js';
import type { AgentEvent } from '../../hack/node-agent/pod-worker.js';
import { isVirtualPod, VirtualPod } from '../../hack/node-agent/virtual-pod.js';

const pod: V1Pod = {
  metadata: { name: 'ctrl-0', namespace: 'csi', uid: 'u1', annotations: { 'csi-handover.io/virtual': 'true' } },
  spec: { initContainers: [{ name: 'init' }], containers: [{ name: 'csi-provisioner', image: 'img' }, { name: 'csi-attacher', image: 'img' }] },
};

function virtual() {
  const events: AgentEvent[] = [];
  let changes = 0;
  const v = new VirtualPod(pod, { node: 'node-1', hostIP: '127.0.0.1', podIP: '127.3.0.2', record: (e) => events.push(e), changed: () => changes++ });
  return { v, events, changes: () => changes };
}

describe('VirtualPod', () => {
  it('is chosen by the annotation', () => {
    expect(isVirtualPod(pod)).toBe(true);
    expect(isVirtualPod({ metadata: { annotations: { 'csi-handover.io/virtual': 'false' } } })).toBe(false);
    expect(isVirtualPod({})).toBe(false);
  });

  it('reports Running and Ready once started, init containers completed', async () => {
    const { v, changes } = virtual();
    expect(podStatus(pod, v.view(), new Date()).phase).toBe('Pending');
    await v.start();
    const s = podStatus(pod, v.view(), new Date());
    expect(s.phase).toBe('Running');
    expect(s.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(s.initContainerStatuses?.[0]?.state?.terminated?.exitCode).toBe(0);
    expect(changes()).toBeGreaterThan(0);
  });

  it('on deletion: SIGTERM, every container terminated with exit code 0, as a real pod whose containers exit on SIGTERM', async () => {
    const { v, events } = virtual();
    await v.start();
    await v.stop(30, 'pod deleted');
    await v.stop(30, 'pod deleted'); // a second deletion event changes nothing
    expect(v.isStopped()).toBe(true);
    const s = podStatus(pod, v.view(), new Date());
    expect(s.containerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode, c.state?.terminated?.reason])).toEqual([
      ['csi-provisioner', 0, 'Completed'], ['csi-attacher', 0, 'Completed'],
    ]);
    expect(events.map((e) => `${e.event} ${e.container ?? ''} ${e.signal ?? ''}`.trim())).toEqual([
      'pod-started', 'signal csi-provisioner SIGTERM', 'container-exited csi-provisioner', 'signal csi-attacher SIGTERM', 'container-exited csi-attacher', 'pod-stopped',
    ]);
  });
});
