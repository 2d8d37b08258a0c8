// planDriver: which pod templates the ClusterCSIDriver reconcile rewrites, and what it reports, for each kind of CR,
// mode and write access. One row per situation; the writes are checked by applying their rewrite to the template.
import type { V1PodSpec } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ClusterCSIDriver } from '../../src/api/clustercsidriver.js';
import { HANDOVER_GATE } from '../../src/api/names.js';
import { type DriverInput, type Mode, planDriver, type Workload } from '../../src/controller/clustercsidriver/plan.js';

const cr = (spec: Record<string, unknown>): ClusterCSIDriver => ClusterCSIDriver.parse({ metadata: { name: 'hostpath.csi.k8s.io', generation: 1 }, spec });
const template = (args: string[], gated = false): V1PodSpec => ({
  containers: [{ name: 'csi-provisioner', args }],
  ...(gated ? { schedulingGates: [{ name: HANDOVER_GATE }] } : {}),
});
const dep = (args: string[], gated = false): Workload => ({
  kind: 'Deployment',
  obj: { metadata: { name: 'ctrl', namespace: 'csi' }, spec: { selector: { matchLabels: { app: 'ctrl' } }, template: { spec: template(args, gated) } } },
});
const ds = (args: string[]): Workload => ({
  kind: 'DaemonSet',
  obj: { metadata: { name: 'node', namespace: 'csi' }, spec: { selector: { matchLabels: { app: 'node' } }, template: { spec: template(args) } } },
});

const plan = (o: Partial<DriverInput> & { spec: Record<string, unknown>; mode?: Mode }) =>
  planDriver({
    cr: cr(o.spec),
    mode: o.mode ?? 'standalone',
    namespacesDescription: 'any namespace',
    workloads: o.workloads ?? [],
    unmanaged: o.unmanaged ?? [],
    noWriteAccess: o.noWriteAccess ?? [],
  });
/** Each write as "Kind: what → the args its rewrite leaves" (or the gates it leaves). */
const writes = (p: ReturnType<typeof planDriver>): string[] =>
  p.writes.map((w) => {
    const spec = w.rewrite(w.workload.obj.spec?.template.spec ?? { containers: [] });
    return `${w.workload.kind}: ${w.what} → ${(spec.containers[0]?.args ?? []).join(' ')}${spec.schedulingGates ? ' (gated)' : ''}`;
  });

describe('planDriver', () => {
  it('standalone, Managed: every workload not at the level is rewritten, an old template gate leaving with it', () => {
    const p = plan({ spec: { logLevel: 'Debug' }, workloads: [dep(['--v=2'], true), ds(['--v=2'])] });
    expect(writes(p)).toEqual(['Deployment: set klog verbosity --v=4 → --v=4', 'DaemonSet: set klog verbosity --v=4 → --v=4']);
    expect(p.observation).toMatchObject({ targetVerbosity: 4, notAtTarget: [], unparsable: [] });
    expect(p.reportsWorkloads).toBe(true);
  });

  it('a workload already at the level is not written', () => {
    expect(writes(plan({ spec: { logLevel: 'Trace' }, workloads: [dep(['--v=6'])] }))).toEqual([]);
  });

  it('companion: nothing is written; a workload off the level is reported as left to the driver operator', () => {
    const p = plan({ spec: { logLevel: 'Debug' }, mode: 'companion', workloads: [dep(['--v=2'])] });
    expect(writes(p)).toEqual([]);
    expect(p.observation.notAtTarget).toEqual(['Deployment csi/ctrl']);
  });

  it('Unmanaged: nothing is written; reported as not at the level', () => {
    const p = plan({ spec: { logLevel: 'Debug', managementState: 'Unmanaged' }, workloads: [dep(['--v=2'])] });
    expect(writes(p)).toEqual([]);
    expect(p.observation).toMatchObject({ managementState: 'Unmanaged', notAtTarget: ['Deployment csi/ctrl'] });
  });

  it('no write access for Deployments there: not tried, reported as not writable; the DaemonSet is still written', () => {
    const p = plan({
      spec: { logLevel: 'Debug' },
      workloads: [dep(['--v=2']), ds(['--v=2'])],
      noWriteAccess: [{ namespace: 'csi', denied: ['update deployments'] }],
    });
    expect(writes(p)).toEqual(['DaemonSet: set klog verbosity --v=4 → --v=4']);
    expect(p.observation).toMatchObject({ notWritable: ['Deployment csi/ctrl'], noWriteAccess: [{ namespace: 'csi', denied: ['update deployments'] }] });
  });

  it('args that cannot be parsed: not rewritten, reported with the reason', () => {
    const p = plan({ spec: { logLevel: 'Debug' }, workloads: [dep(['--v=abc'])] });
    expect(writes(p)).toEqual([]);
    expect(p.observation.unparsable.map((u) => u.workload)).toEqual(['Deployment csi/ctrl']);
  });

  it('an invalid spec: nothing written, the field and message reported, no workload reported', () => {
    const p = plan({ spec: { logLevel: 'Loud' }, workloads: [dep(['--v=2'])] });
    expect(writes(p)).toEqual([]);
    expect(p.observation.invalidSpec?.field).toBe('spec.logLevel');
    expect(p.reportsWorkloads).toBe(false);
  });

  it('Removed, standalone: only the handover gate an older version put into a template is taken out, nothing of the driver', () => {
    const p = plan({ spec: { logLevel: 'Debug', managementState: 'Removed' }, workloads: [dep(['--v=2'], true), ds(['--v=2'])] });
    expect(writes(p)).toEqual(['Deployment: removed the handover scheduling gate → --v=2']);
    expect(p.reportsWorkloads).toBe(false);
  });

  it('Removed, companion: nothing is written', () => {
    expect(writes(plan({ spec: { managementState: 'Removed' }, mode: 'companion', workloads: [dep(['--v=2'], true)] }))).toEqual([]);
  });

  it('labelled objects of kinds not managed are noted, and left alone', () => {
    const p = plan({ spec: {}, unmanaged: ['StatefulSet csi/snap'] });
    expect(p.observation.notes).toEqual([
      'StatefulSet csi/snap is labelled csi-handover.io/driver=hostpath.csi.k8s.io, but only Deployments and DaemonSets are managed: left alone',
    ]);
  });
});
