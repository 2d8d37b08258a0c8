// Every handover is reported, in the shapes users' drivers have: a client-go `<pod>_<suffix>` holder, a
// hostNetwork controller whose new pod takes the lease over under the same identity on the same node, leases kept
// in another namespace (--leader-election-namespace), two drivers whose leases have the same name, and the
// report kept across an operator restart. Small drivers of real components: csi-attacher beside csi-test-driver,
// and kube-scheduler (a client-go leader elector) for the suffix identity.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventRecorder } from '../../src/kube/events.js';
import { PatchType } from '../../src/kube/http.js';
import { isConflict, isNotFound } from '../../src/kube/errors.js';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, kubectl, waitFor } from '../../hack/lib/cluster.js';
import {
  grantDriverNamespace,
  installOperator,
  OPERATOR_NAMESPACE,
  operatorLeader,
  operatorMetric,
  reportStatus,
  setOperatorMode,
} from '../../hack/lib/operator.js';
import { rolloutRestart, waitRolloutComplete } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const FM = 'csi-handover-test';
const CRS = '/apis/operator.openshift.io/v1/clustercsidrivers';
const made: { namespaces: string[]; crs: string[]; clusterObjects: string[] } = { namespaces: [], crs: [], clusterObjects: [] };

interface ReportedLease {
  lease: string;
  namespace: string;
  oldHolder: string;
  newHolder: string;
  releasedBy: string;
  acquireTime?: string;
  gapSeconds?: number;
}
interface CR {
  metadata: { generation?: number };
  status?: {
    observedGeneration?: number;
    conditions?: { type: string; reason?: string; message?: string }[];
  };
}

const apply = (path: string, body: object) => http.apply(path, body, FM);

async function namespace(name: string): Promise<void> {
  await apply(`/api/v1/namespaces/${name}`, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  made.namespaces.push(name);
  await grantDriverNamespace(http, name);
  await waitFor(`default service account in ${name}`, 30_000, async () =>
    http.get(`/api/v1/namespaces/${name}/serviceaccounts/default`).then(
      () => true,
      () => false,
    ),
  );
}

/** The driver's service account may run its leader election in `leaseNamespace`, and (cluster-wide) what `clusterRole` grants. */
async function grant(ns: string, leaseNamespace: string, clusterRole: string): Promise<void> {
  const role = `${ns}-leases`;
  await apply(`/apis/rbac.authorization.k8s.io/v1/namespaces/${leaseNamespace}/roles/${role}`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: role, namespace: leaseNamespace },
    rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] }],
  });
  await apply(`/apis/rbac.authorization.k8s.io/v1/namespaces/${leaseNamespace}/rolebindings/${role}`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: role, namespace: leaseNamespace },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role },
  });
  const binding = `${ns}-${clusterRole.replaceAll(':', '-')}`;
  await apply(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${binding}`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: binding },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
  });
  made.clusterObjects.push(`clusterrolebinding/${binding}`);
}

/** A managed controller Deployment of driver `driver` (the CR's name) with the given containers. */
async function controller(ns: string, driver: string, spec: Record<string, unknown>, replicas = 1): Promise<void> {
  const labels = { app: 'ctrl', 'csi-handover.io/driver': driver };
  await apply(`/apis/apps/v1/namespaces/${ns}/deployments/ctrl`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'ctrl', namespace: ns, labels },
    spec: {
      replicas,
      selector: { matchLabels: { app: 'ctrl' } },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      template: { metadata: { labels }, spec: { terminationGracePeriodSeconds: 30, ...spec } },
    },
  });
  await http
    .request('POST', CRS, {
      body: {
        apiVersion: 'operator.openshift.io/v1',
        kind: 'ClusterCSIDriver',
        metadata: { name: driver },
        spec: { managementState: 'Managed', logLevel: 'Normal' },
      },
    })
    .catch((err: unknown) => {
      if (!isConflict(err)) throw err;
    });
  made.crs.push(driver);
  await waitRolloutComplete(http, ns, 'ctrl', 120_000);
}

/** csi-attacher (upstream image) beside the stateless csi-test-driver, electing in `electIn` (default: its own namespace). */
function attacherDriver(
  csiDriver: string,
  opts: { electIn?: string; hostNetwork?: boolean; node?: string; leaseSeconds?: number } = {},
): Record<string, unknown> {
  const lease = opts.leaseSeconds ?? 15;
  return {
    hostNetwork: opts.hostNetwork,
    nodeSelector: opts.node ? { 'kubernetes.io/hostname': opts.node } : undefined,
    containers: [
      {
        name: 'driver',
        image: 'csi-handover.local/csi-test-driver:v0.1.0',
        args: [`--drivername=${csiDriver}`, '--endpoint=unix:///csi/csi.sock', '--nodeid=n', '--v=2'],
        volumeMounts: [{ name: 'socket', mountPath: '/csi' }],
      },
      {
        name: 'csi-attacher',
        image: 'registry.k8s.io/sig-storage/csi-attacher:v4.12.0',
        args: [
          '--csi-address=/csi/csi.sock',
          '--v=2',
          '--leader-election=true',
          ...(opts.electIn ? [`--leader-election-namespace=${opts.electIn}`] : []),
          `--leader-election-lease-duration=${lease}s`,
          `--leader-election-renew-deadline=${Math.round((lease * 2) / 3)}s`,
          '--leader-election-retry-period=2s',
        ],
        volumeMounts: [{ name: 'socket', mountPath: '/csi' }],
      },
    ],
    volumes: [{ name: 'socket', emptyDir: {} }],
  };
}
const attacherLease = (csiDriver: string) => `external-attacher-leader-${csiDriver.replaceAll('.', '-')}`;

async function holderOf(ns: string, lease: string): Promise<string | undefined> {
  return http.get<{ spec?: { holderIdentity?: string } }>(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lease}`).then(
    (l) => l.spec?.holderIdentity || undefined,
    () => undefined,
  );
}

/** Waits for the CR to report a handover of this lease acquired after `since`; returns it. */
async function reported(driver: string, namespace: string, lease: string, since: Date, timeoutMs = 60_000): Promise<ReportedLease> {
  return waitFor(
    `${driver} to report a handover of ${namespace}/${lease}`,
    timeoutMs,
    async () => {
      const report = await reportStatus(http, driver);
      const r = report?.lastRollout?.leases?.find((l) => l.lease === lease && l.namespace === namespace);
      return r && Date.parse(r.acquireTime ?? '') >= since.getTime() - 1_000 ? r : undefined;
    },
    250,
  );
}

beforeAll(async () => {
  // A namespace left by an interrupted run may still be terminating: creating into it would fail.
  for (const ns of ['report-suffix', 'report-hostnet', 'report-elsewhere', 'report-leases', 'report-twin-a', 'report-twin-b']) {
    await waitFor(`namespace ${ns} gone or active`, 120_000, async () =>
      http.get<{ status?: { phase?: string } }>(`/api/v1/namespaces/${ns}`).then(
        (n) => n.status?.phase !== 'Terminating',
        (err: unknown) => isNotFound(err),
      ),
    );
  }
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
}, 420_000);

afterAll(async () => {
  for (const cr of made.crs) await http.request('DELETE', `${CRS}/${cr}`).catch(() => undefined);
  for (const o of made.clusterObjects) await kubectl('delete', ...o.split(' '), '--ignore-not-found').catch(() => undefined);
  for (const ns of made.namespaces) await kubectl('delete', 'namespace', ns, '--ignore-not-found', '--wait=false').catch(() => undefined);
});

describe('every handover is reported', () => {
  it('a client-go `<pod>_<suffix>` holder (kube-scheduler): the gap is measured from the old pod’s stop', async () => {
    const ns = 'report-suffix';
    const driver = 'suffix.csi-handover.test';
    await namespace(ns);
    await grant(ns, ns, 'system:kube-scheduler');
    await grant(ns, ns, 'system:volume-scheduler'); // it syncs every informer before it elects
    await apply(`/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/${ns}-auth-reader`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: `${ns}-auth-reader`, namespace: 'kube-system' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'extension-apiserver-authentication-reader' },
    });
    made.clusterObjects.push(`-n kube-system rolebinding/${ns}-auth-reader`);
    await apply(`/api/v1/namespaces/${ns}/configmaps/scheduler`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'scheduler', namespace: ns },
      data: {
        'config.yaml': [
          'apiVersion: kubescheduler.config.k8s.io/v1',
          'kind: KubeSchedulerConfiguration',
          // A profile no pod asks for: it schedules nothing, it only elects.
          'profiles: [{schedulerName: csi-handover-test-nobody}]',
          `leaderElection: {leaderElect: true, resourceLock: leases, resourceNamespace: ${ns}, resourceName: test-scheduler, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}`,
        ].join('\n'),
      },
    });
    await controller(ns, driver, {
      containers: [
        {
          name: 'scheduler',
          image: 'registry.k8s.io/kube-scheduler:v1.36.3',
          command: ['/kube-scheduler', '--config=/etc/scheduler/config.yaml', '--v=2'],
          volumeMounts: [{ name: 'config', mountPath: '/etc/scheduler' }],
        },
      ],
      volumes: [{ name: 'config', configMap: { name: 'scheduler' } }],
    });
    const before = await waitFor('the scheduler leading', 60_000, () => holderOf(ns, 'test-scheduler'));
    expect(before).toMatch(/^ctrl-[a-z0-9]+-[a-z0-9]+_[0-9a-f-]{36}$/);
    const since = await rolloutRestart(http, ns, 'ctrl');
    const r = await reported(driver, ns, 'test-scheduler', since);
    expect(r.oldHolder).toBe(before);
    expect(r.newHolder).toMatch(/_[0-9a-f-]{36}$/);
    expect(r.newHolder).not.toBe(before);
    expect(r.gapSeconds, 'gap from the old pod’s stop').toBeDefined();
    expect(r.gapSeconds ?? Infinity).toBeLessThan(30);
  });

  it('a hostNetwork controller whose new pod takes over under the same identity on the same node', async () => {
    const ns = 'report-hostnet';
    const driver = 'hostnet.csi-handover.test';
    await namespace(ns);
    await grant(ns, ns, 'external-attacher-runner');
    await controller(ns, driver, attacherDriver('hostnet.csi.test', { hostNetwork: true, node: 'node-1' }));
    const lease = attacherLease('hostnet.csi.test');
    expect(await waitFor('the attacher leading', 60_000, () => holderOf(ns, lease))).toBe('node-1');
    const since = await rolloutRestart(http, ns, 'ctrl');
    const r = await reported(driver, ns, lease, since);
    expect(r).toMatchObject({ oldHolder: 'node-1', newHolder: 'node-1' });
    expect(r.gapSeconds, 'gap from the old pod’s stop').toBeDefined();
    const cr = await http.get<CR>(`${CRS}/${driver}`);
    expect(cr.status?.conditions?.find((c) => c.type === 'CSIHandoverLeasesHandedOver')?.reason).not.toBe('NoHandoverYet');
  });

  it('leases kept in another namespace (--leader-election-namespace) are released by the operator and reported', async () => {
    const ns = 'report-elsewhere';
    const leases = 'report-leases';
    const driver = 'elsewhere.csi-handover.test';
    await namespace(ns);
    await namespace(leases);
    await grant(ns, leases, 'external-attacher-runner');
    // A 60s lease: without a release the new pod waits for it to expire.
    await controller(ns, driver, attacherDriver('elsewhere.csi.test', { electIn: leases, leaseSeconds: 60 }), 2);
    const lease = attacherLease('elsewhere.csi.test');
    await waitFor('the attacher leading', 60_000, () => holderOf(leases, lease));
    const since = await rolloutRestart(http, ns, 'ctrl');
    const r = await reported(driver, leases, lease, since, 50_000);
    expect(r.releasedBy).toBe('operator');
    expect(r.gapSeconds ?? Infinity).toBeLessThan(30);
  });

  it('two drivers with leases of the same name: each CR reports its own, and the gap metric tells them apart', async () => {
    const twins = ['report-twin-a', 'report-twin-b'];
    const lease = attacherLease('twin.csi.test');
    for (const ns of twins) {
      await namespace(ns);
      await grant(ns, ns, 'external-attacher-runner');
      await controller(ns, `${ns}.csi-handover.test`, attacherDriver('twin.csi.test'), 2);
      await waitFor('the attacher leading', 60_000, () => holderOf(ns, lease));
    }
    const since = new Date();
    await Promise.all(twins.map((ns) => rolloutRestart(http, ns, 'ctrl')));
    for (const ns of twins) {
      const r = await reported(`${ns}.csi-handover.test`, ns, lease, since);
      expect(r.releasedBy).toBe('operator');
      expect((await reportStatus(http, `${ns}.csi-handover.test`))?.lastRollout?.leases?.map((l) => l.namespace)).toEqual([ns]);
      expect(
        await operatorMetric(http, `csi_handover_handover_gap_seconds_count{namespace="${ns}",lease="${lease}",released_by="operator"}`),
      ).toBeGreaterThanOrEqual(1);
    }
  });

  it('an operator restart keeps the last handover in the report and the CR', async () => {
    const driver = 'report-twin-a.csi-handover.test';
    const before = await http.get<CR>(`${CRS}/${driver}`);
    const reportBefore = await reportStatus(http, driver);
    expect(reportBefore?.lastRollout?.leases?.length).toBeGreaterThan(0);
    const oldLeader = (await operatorLeader(http)).metadata?.name;
    await rolloutRestart(http, OPERATOR_NAMESPACE, 'csi-handover');
    await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
    await waitFor('a new operator leader', 60_000, async () => (await operatorLeader(http).catch(() => undefined))?.metadata?.name !== oldLeader);
    // A spec change the new leader must answer with a status apply (observedGeneration).
    await http.patch(`${CRS}/${driver}`, { spec: { operatorLogLevel: 'Debug' } }, PatchType.merge);
    const after = await waitFor('the new leader’s status', 60_000, async () => {
      const cr = await http.get<CR>(`${CRS}/${driver}`);
      return cr.status?.observedGeneration === cr.metadata.generation ? cr : undefined;
    });
    const reportAfter = await reportStatus(http, driver);
    expect(reportAfter?.lastRollout?.leases).toEqual(reportBefore?.lastRollout?.leases);
    expect(reportAfter?.totals).toEqual(reportBefore?.totals);
    expect(after.status?.conditions?.find((c) => c.type === 'CSIHandoverLeasesHandedOver')?.message).toBe(
      before.status?.conditions?.find((c) => c.type === 'CSIHandoverLeasesHandedOver')?.message,
    );
  });
});

describe('Events', () => {
  it('a repeated event is one Event with a count, as client-go’s recorder aggregates them', async () => {
    const recorder = new EventRecorder(http, makeLogger('test', 'warn'), 'test');
    const target = { apiVersion: 'v1', kind: 'ConfigMap', name: 'scheduler', namespace: 'report-suffix' };
    const message = `repeat ${Date.now()}`;
    for (let i = 0; i < 3; i++) await recorder.emit(target, 'Normal', 'TestRepeat', message);
    const list = await http.get<{ items: { count?: number; message?: string; lastTimestamp?: string; firstTimestamp?: string }[] }>(
      '/api/v1/namespaces/report-suffix/events',
      { fieldSelector: 'reason=TestRepeat' },
    );
    const mine = list.items.filter((e) => e.message === message);
    expect(mine).toHaveLength(1);
    expect(mine[0]?.count).toBe(3);
  });
});
