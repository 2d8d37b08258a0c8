import { describe, expect, it } from 'vitest';
import { writeNeeds, type Workload } from '../../src/controller/clustercsidriver/plan.js';
import { describeNeed } from '../../src/kube/access.js';

const dep = (ns: string, args: string[] = []): Workload => ({
  kind: 'Deployment',
  obj: { metadata: { name: 'ctrl', namespace: ns }, spec: { selector: {}, template: { spec: { containers: [{ name: 'csi-attacher', args }] } } } },
});
const ds = (ns: string): Workload => ({
  kind: 'DaemonSet',
  obj: { metadata: { name: 'node', namespace: ns }, spec: { selector: {}, template: { spec: { containers: [] } } } },
});
const flat = (m: Map<string, { verb: string; group: string; resource: string }[]>) =>
  Object.fromEntries([...m].map(([ns, needs]) => [ns, needs.map(describeNeed)]));

describe('writeNeeds (what a driver needs granted, by namespace)', () => {
  it('standalone: leases and pods of the controller, its Deployment and DaemonSet', () => {
    expect(flat(writeNeeds([dep('csi'), ds('csi')], true))).toEqual({ csi: ['patch pods', 'update leases', 'update deployments', 'update daemonsets'] });
  });
  it('companion (no workload writes): leases and pods only', () => {
    expect(flat(writeNeeds([dep('csi'), ds('csi')], false))).toEqual({ csi: ['patch pods', 'update leases'] });
  });
  it("sidecars electing in another namespace: the lease release is needed there too (the pod's own is always looked at)", () => {
    expect(flat(writeNeeds([dep('csi', ['--leader-election-namespace=leases'])], false))).toEqual({
      csi: ['patch pods', 'update leases'],
      leases: ['update leases'],
    });
  });
});
