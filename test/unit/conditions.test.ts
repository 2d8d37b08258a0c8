import type { V1Container, V1LabelSelector } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { type Workload, workloadNote } from '../../src/controller/clustercsidriver/plan.js';
import { validateSpec } from '../../src/api/clustercsidriver.js';
import {
  AVAILABLE,
  computeConditions,
  conditionsUpToDate,
  DEGRADED,
  type DriverObservation,
  PROGRESSING,
  withTransitionTimes,
} from '../../src/status/conditions.js';
import type { WorkloadProgress } from '../../src/status/workload-progress.js';

const w = (p: Partial<WorkloadProgress> = {}): WorkloadProgress => ({
  kind: 'Deployment',
  namespace: 'csi',
  name: 'ctrl',
  desired: 2,
  updated: 2,
  available: 2,
  total: 2,
  observed: true,
  complete: true,
  minimumAvailable: true,
  ...p,
});
const obs = (o: Partial<DriverObservation> = {}): DriverObservation => ({
  managementState: 'Managed',
  selector: 'csi-handover.io/driver=d',
  namespaces: 'any namespace',
  workloads: [w()],
  unparsable: [],
  notAtTarget: [],
  targetVerbosity: 4,
  syncErrors: [],
  ...o,
});
const summary = (o: DriverObservation) => computeConditions(o).map((c) => `${c.type}=${c.status}/${c.reason}`);

describe('computeConditions', () => {
  it.each([
    ['all rolled out', obs(), [`${AVAILABLE}=True/AsExpected`, `${PROGRESSING}=False/AsExpected`, `${DEGRADED}=False/AsExpected`]],
    [
      'rolling, still available',
      obs({ workloads: [w({ updated: 1, total: 3, complete: false })] }),
      [`${AVAILABLE}=True/AsExpected`, `${PROGRESSING}=True/Deploying`, `${DEGRADED}=False/AsExpected`],
    ],
    [
      'rolling, one pod down within maxUnavailable',
      obs({ workloads: [w({ updated: 1, available: 1, complete: false })] }),
      [`${AVAILABLE}=True/AsExpected`, `${PROGRESSING}=True/Deploying`, `${DEGRADED}=False/AsExpected`],
    ],
    [
      'below the minimum available',
      obs({ workloads: [w({ updated: 1, available: 0, complete: false, minimumAvailable: false })] }),
      [`${AVAILABLE}=False/WorkloadsUnavailable`, `${PROGRESSING}=True/Deploying`, `${DEGRADED}=False/AsExpected`],
    ],
    ['no workloads', obs({ workloads: [] }), [`${AVAILABLE}=False/NoWorkloadsFound`, `${PROGRESSING}=False/NoWorkloadsFound`, `${DEGRADED}=False/AsExpected`]],
    [
      'invalid spec',
      obs({ invalidSpec: { field: 'spec.logLevel', message: 'spec.logLevel: "x" is not one of …' } }),
      [`${AVAILABLE}=Unknown/InvalidSpec`, `${PROGRESSING}=False/InvalidSpec`, `${DEGRADED}=True/InvalidSpec`],
    ],
    ['removed', obs({ managementState: 'Removed' }), [`${AVAILABLE}=False/Removed`, `${PROGRESSING}=False/Removed`, `${DEGRADED}=False/Removed`]],
    [
      'unparsable args',
      obs({ unparsable: [{ workload: 'Deployment csi/ctrl', reasons: ['bad'] }] }),
      [`${AVAILABLE}=True/AsExpected`, `${PROGRESSING}=False/AsExpected`, `${DEGRADED}=True/UnparsableArgs`],
    ],
    [
      'failed write',
      obs({ syncErrors: ['Deployment csi/ctrl: 500'] }),
      [`${AVAILABLE}=True/AsExpected`, `${PROGRESSING}=False/AsExpected`, `${DEGRADED}=True/SyncError`],
    ],
    [
      'no write access, and a failed write',
      obs({ noWriteAccess: [{ namespace: 'csi', denied: ['update leases'] }], syncErrors: ['x'] }),
      [`${AVAILABLE}=True/AsExpected`, `${PROGRESSING}=False/AsExpected`, `${DEGRADED}=True/NoWriteAccess`],
    ],
  ])('%s', (_n, o, want) => expect(summary(o)).toEqual(want));

  it('says which workload is rolling and how far', () => {
    const p = computeConditions(obs({ workloads: [w({ updated: 1, available: 1, total: 2, complete: false })] })).find((c) => c.type === PROGRESSING);
    expect(p?.message).toBe('Deployment csi/ctrl: 1/2 updated, 1/2 available');
  });
  it('names the selector and namespaces when no workload is found', () => {
    expect(computeConditions(obs({ workloads: [] }))[0]?.message).toBe('no Deployment or DaemonSet labelled csi-handover.io/driver=d in any namespace');
  });
  it('adds what it leaves alone in a workload to the Available message', () => {
    const a = computeConditions(obs({ notes: ['Deployment csi/x has no klog verbosity flag'] })).find((c) => c.type === AVAILABLE);
    expect(a?.message).toBe('1 workload(s) available; Deployment csi/x has no klog verbosity flag');
  });
  it('with no workload to manage, still says what it leaves alone (a labelled StatefulSet)', () => {
    const a = computeConditions(obs({ workloads: [], notes: ['StatefulSet csi/s is labelled …: left alone'] }))[0];
    expect(a?.message).toBe('no Deployment or DaemonSet labelled csi-handover.io/driver=d in any namespace; StatefulSet csi/s is labelled …: left alone');
  });
  it('reports workloads left at another level when it may not write', () => {
    const p = computeConditions(obs({ notAtTarget: ['Deployment csi/ctrl'], managementState: 'Unmanaged' })).find((c) => c.type === PROGRESSING);
    expect(p?.message).toBe('not at --v=4 (Unmanaged: not written): Deployment csi/ctrl');
  });
});

describe('withTransitionTimes / conditionsUpToDate', () => {
  const drafts = computeConditions(obs());
  it('keeps lastTransitionTime while the status is unchanged and moves it on a change', () => {
    const first = withTransitionTimes(drafts, [], 't1');
    expect(withTransitionTimes(drafts, first, 't2').map((c) => c.lastTransitionTime)).toEqual(['t1', 't1', 't1']);
    const changed = withTransitionTimes(computeConditions(obs({ workloads: [] })), first, 't3');
    expect(changed.find((c) => c.type === AVAILABLE)?.lastTransitionTime).toBe('t3');
    expect(changed.find((c) => c.type === DEGRADED)?.lastTransitionTime).toBe('t1');
  });
  it('needs no write when type, status, reason and message match', () => {
    const current = withTransitionTimes(drafts, [], 't1');
    expect(conditionsUpToDate(withTransitionTimes(drafts, current, 't2'), current)).toBe(true);
    expect(conditionsUpToDate(withTransitionTimes(computeConditions(obs({ targetVerbosity: 6 })), current, 't2'), current)).toBe(false);
    expect(conditionsUpToDate(current, [])).toBe(false);
  });
});

describe('validateSpec', () => {
  it.each([
    [{}, { managementState: 'Managed', logLevel: 'Normal', operatorLogLevel: 'Normal' }],
    [
      { managementState: 'Force', logLevel: 'TraceAll', operatorLogLevel: '' },
      { managementState: 'Force', logLevel: 'TraceAll', operatorLogLevel: '' },
    ],
    [{ logLevel: null }, { managementState: 'Managed', logLevel: 'Normal', operatorLogLevel: 'Normal' }], // null is unset
  ])('accepts %j', (spec, want) => expect(validateSpec(spec)).toEqual({ ok: true, spec: want }));
  it.each([
    [{ logLevel: 'Chatty' }, 'spec.logLevel', '"Chatty"'],
    [{ logLevel: 4 }, 'spec.logLevel', '4'],
    [{ managementState: 'managed' }, 'spec.managementState', '"managed"'],
    [{ operatorLogLevel: 'Loud' }, 'spec.operatorLogLevel', '"Loud"'],
  ])('rejects %j, naming the field and value', (spec, field, value) => {
    const v = validateSpec(spec);
    expect(v.ok).toBe(false);
    if (!v.ok) {
      expect(v.field).toBe(field);
      expect(v.message).toContain(`${field}: ${value} is not one of`);
    }
  });
});

describe('workload progress', () => {
  it('takes a Deployment’s availability from its own Available condition', async () => {
    const { deploymentProgress } = await import('../../src/status/workload-progress.js');
    const d = (available: number, cond: string) =>
      deploymentProgress({
        metadata: { name: 'c', namespace: 'n', generation: 2 },
        spec: { replicas: 2, selector: {}, template: {} },
        status: { observedGeneration: 2, replicas: 2, updatedReplicas: 1, availableReplicas: available, conditions: [{ type: 'Available', status: cond }] },
      });
    expect(d(1, 'True')).toMatchObject({ minimumAvailable: true, complete: false });
    expect(d(1, 'False').minimumAvailable).toBe(false);
    expect(d(0, 'True').minimumAvailable).toBe(false);
  });
  it('allows a DaemonSet its maxUnavailable, as a count or a percentage', async () => {
    const { daemonSetProgress } = await import('../../src/status/workload-progress.js');
    const ds = (available: number, maxUnavailable?: number | string) =>
      daemonSetProgress({
        metadata: { name: 'n', namespace: 'n', generation: 1 },
        spec: { selector: {}, template: {}, updateStrategy: maxUnavailable === undefined ? undefined : { rollingUpdate: { maxUnavailable } } },
        status: {
          observedGeneration: 1,
          desiredNumberScheduled: 4,
          updatedNumberScheduled: 4,
          numberAvailable: available,
          currentNumberScheduled: 4,
          numberMisscheduled: 0,
          numberReady: available,
        },
      }).minimumAvailable;
    expect([ds(3), ds(2), ds(2, 2), ds(1, '50%'), ds(2, '50%'), ds(0, '100%')]).toEqual([true, false, true, false, true, false]);
  });
  it('says where write access is missing, what it costs and how to grant it; and which workloads were left', () => {
    const o = obs({
      noWriteAccess: [
        { namespace: 'csi', denied: ['update leases', 'patch pods'] },
        { namespace: 'leases', denied: ['update leases'] },
      ],
      notWritable: ['Deployment csi/ctrl'],
    });
    const [, progressing, degraded] = computeConditions(o);
    expect(degraded?.message).toBe(
      'csi-handover may not update leases, patch pods in namespace csi; update leases in namespace leases: its handovers there fall back to lease expiry and nothing is written. ' +
        'Grant it with a RoleBinding to ClusterRole csi-handover-driver, e.g. kubectl -n csi create rolebinding csi-handover-driver --clusterrole=csi-handover-driver --serviceaccount=<operator namespace>:csi-handover',
    );
    expect(progressing?.message).toBe(`not at --v=4 (no write access, see ${DEGRADED}): Deployment csi/ctrl`);
  });
});

describe('workloadNote', () => {
  const dep = (containers: V1Container[], selector: V1LabelSelector = { matchLabels: { app: 'x' } }): Workload => ({
    kind: 'Deployment',
    obj: { metadata: { namespace: 'csi', name: 'x' }, spec: { selector, template: { spec: { containers } } } },
  });
  it('a workload with a verbosity flag in some container, selected by labels: nothing to say', () => {
    expect(workloadNote(dep([{ name: 'a' }, { name: 'b', args: ['--v=2'] }]))).toBeUndefined();
    expect(workloadNote(dep([{ name: 'a', command: ['/bin/a', '-v', '3'] }]))).toBeUndefined();
  });
  it('no container has --v or -v: its level is left as it is', () => {
    expect(workloadNote(dep([{ name: 'a', args: ['--vv=2', '--verbose'] }]))).toBe(
      'Deployment csi/x has no klog verbosity flag (--v/-v) in any container: its level is left as it is',
    );
  });
  it('a matchExpressions selector: not coordinated', () => {
    expect(workloadNote(dep([{ name: 'a', args: ['--v=2'] }], { matchExpressions: [{ key: 'app', operator: 'In', values: ['x'] }] }))).toContain(
      'matchExpressions: its rollouts are not coordinated',
    );
  });
});
