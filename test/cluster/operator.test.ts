// The operator on the real cluster, installed from config/ as pods running under its own service account
// and RBAC: ClusterCSIDriver logLevel → --v on the driver's Deployment and DaemonSet, status conditions,
// bad input, management states, companion mode, and its own leader election.
import { readFileSync, writeFileSync } from 'node:fs';
import { parse, stringify } from 'yaml';
import { join } from 'node:path';
import type { V1DaemonSet, V1Deployment, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HANDOVER_GATE } from '../../src/api/names.js';
import { PatchType } from '../../src/kube/http.js';
import { makeLogger } from '../../src/log.js';
import { LeaseRecorder, sigtermTimes } from '../../hack/bench/recorder.js';
import { clusterHttp, kubectl, localDir, repoRoot, waitFor } from '../../hack/lib/cluster.js';
import { grantDriverNamespace, installOperator, operatorLeader, operatorMetric, operatorPods, operatorRequests } from '../../hack/lib/operator.js';
import { PodLogFollower } from '../../hack/lib/pod-logs.js';
import { deploymentPath, waitRolloutComplete } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const DRIVER = 'test.csi.example.com';
const NS = `operator-test-${Date.now().toString(36)}`;
const OP_NS = 'csi-handover';
const crPath = `/apis/operator.openshift.io/v1/clustercsidrivers/${DRIVER}`;
const dsPath = `/apis/apps/v1/namespaces/${NS}/daemonsets/node-plugin`;

interface Cond {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface CR {
  metadata: { generation: number; resourceVersion: string };
  status?: { observedGeneration?: number; conditions?: Cond[]; generations?: { resource: string; name: string; lastGeneration: number }[] };
}

const driverContainers = (verbosity: number) => [
  // The driver: klog flag in args.
  {
    name: 'driver',
    image: 'csi-handover.local/shell:v1',
    command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.2; done', 'driver'],
    args: [`--v=${verbosity}`, '--endpoint=unix:///csi/csi.sock'],
  },
  // A sidecar with the two-element form.
  {
    name: 'sidecar',
    image: 'csi-handover.local/shell:v1',
    command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.2; done', 'sidecar'],
    args: ['-v', String(verbosity), '--timeout=15s'],
  },
  // A proxy without a klog flag: must be left exactly as it is.
  {
    name: 'proxy',
    image: 'csi-handover.local/shell:v1',
    command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.2; done', 'proxy'],
    args: ['--upstream=http://127.0.0.1:8080'],
  },
];

function workloads() {
  const labels = { 'csi-handover.io/driver': DRIVER };
  const template = (app: string) => ({
    metadata: { labels: { app } },
    spec: { terminationGracePeriodSeconds: 5, containers: driverContainers(2) },
  });
  return {
    deployment: {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'controller', namespace: NS, labels },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'controller' } },
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
        template: template('controller'),
      },
    },
    daemonSet: {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'node-plugin', namespace: NS, labels },
      spec: { selector: { matchLabels: { app: 'node-plugin' } }, template: template('node-plugin') },
    },
  };
}

/** What csi-handover before the admission webhook wrote into a standalone controller's template. */
async function putTemplateGate(): Promise<void> {
  const d = await getDeployment();
  if (d.spec?.template.spec?.schedulingGates?.some((g) => g.name === HANDOVER_GATE)) return;
  await http.patch(deploymentPath(NS, 'controller'), { spec: { template: { spec: { schedulingGates: [{ name: HANDOVER_GATE }] } } } }, PatchType.strategic);
  await waitRolloutComplete(http, NS, 'controller', 120_000);
}
const getCR = () => http.get<CR>(crPath);
const cond = (cr: CR, type: string) => cr.status?.conditions?.find((c) => c.type === type);
const patchSpec = (spec: Record<string, unknown>) => http.patch(crPath, { spec }, PatchType.merge);
const getDeployment = () => http.get<V1Deployment>(deploymentPath(NS, 'controller'));
const getDaemonSet = () => http.get<V1DaemonSet>(dsPath);
const argsOf = (w: V1Deployment | V1DaemonSet) => Object.fromEntries((w.spec?.template.spec?.containers ?? []).map((c) => [c.name, c.args]));

async function waitCondition(type: string, status: string, reason?: string, timeoutMs = 60_000): Promise<Cond> {
  return waitFor(`${type}=${status}${reason ? ` (${reason})` : ''}`, timeoutMs, async () => {
    const c = cond(await getCR(), type);
    return c?.status === status && (!reason || c.reason === reason) ? c : undefined;
  });
}

/** The resourceVersions of the driver's Deployment and DaemonSet, to prove later that nothing wrote them. */
async function workloadVersions(): Promise<(string | undefined)[]> {
  const [d, ds] = await Promise.all([getDeployment(), getDaemonSet()]);
  return [d.metadata?.resourceVersion, ds.metadata?.resourceVersion];
}

/** Waits until the Progressing condition's message contains `text`. */
function waitProgressingMessage(what: string, text: string, timeoutMs: number): Promise<Cond> {
  return waitFor(what, timeoutMs, async () => {
    const c = cond(await getCR(), 'CSIHandoverProgressing');
    return c?.message?.includes(text) ? c : undefined;
  });
}

async function waitDaemonSetRolled(): Promise<void> {
  await waitFor('daemonset rolled out', 120_000, async () => {
    const ds = await getDaemonSet();
    const s = ds.status;
    return (
      (s?.observedGeneration ?? 0) >= (ds.metadata?.generation ?? 0) &&
      s?.desiredNumberScheduled === 2 &&
      s.updatedNumberScheduled === 2 &&
      s.numberAvailable === 2
    );
  });
}

beforeAll(async () => {
  operatorLogFollower.start();
  await installOperator(http);
  await kubectl('create', 'namespace', NS);
  await grantDriverNamespace(http, NS);
  const { deployment, daemonSet } = workloads();
  await http.request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, { body: deployment });
  await http.request('POST', `/apis/apps/v1/namespaces/${NS}/daemonsets`, { body: daemonSet });
  await waitRolloutComplete(http, NS, 'controller', 120_000);
  await waitDaemonSetRolled();
});

afterAll(async () => {
  operatorLogFollower.stop();
  await http.request('DELETE', crPath).catch(() => undefined);
  await kubectl('delete', 'namespace', NS, '--wait=false').catch(() => undefined);
});

describe('ClusterCSIDriver log level (standalone)', () => {
  it('reports the driver Available and not Progressing, with observedGeneration and generations', async () => {
    await http.request('POST', '/apis/operator.openshift.io/v1/clustercsidrivers', {
      body: {
        apiVersion: 'operator.openshift.io/v1',
        kind: 'ClusterCSIDriver',
        metadata: { name: DRIVER },
        spec: { managementState: 'Managed', logLevel: 'Normal', operatorLogLevel: 'Debug' },
      },
    });
    await waitCondition('CSIHandoverAvailable', 'True', 'AsExpected');
    await waitCondition('CSIHandoverProgressing', 'False', 'AsExpected');
    const cr = await waitFor('observedGeneration', 30_000, async () => {
      const c = await getCR();
      return c.status?.observedGeneration === c.metadata.generation && (c.status.generations?.length ?? 0) === 2 ? c : undefined;
    });
    expect(cond(cr, 'CSIHandoverDegraded')?.status).toBe('False');
    expect(cr.status?.generations?.map((g) => `${g.resource}/${g.name}`).sort()).toEqual(['daemonsets/node-plugin', 'deployments/controller']);
  });

  it('logLevel Debug sets --v=4 in every container that has the flag, once, and the workloads roll; a template gate an older version left goes with that write', async () => {
    await putTemplateGate();
    const [d0, ds0] = await Promise.all([getDeployment(), getDaemonSet()]);
    await patchSpec({ logLevel: 'Debug' });
    await waitFor('deployment at --v=4', 60_000, async () => argsOf(await getDeployment()).driver?.includes('--v=4'));
    await waitRolloutComplete(http, NS, 'controller', 120_000);
    await waitDaemonSetRolled();
    await waitCondition('CSIHandoverProgressing', 'False', 'AsExpected');
    const [d1, ds1] = await Promise.all([getDeployment(), getDaemonSet()]);
    for (const [before, after] of [
      [d0, d1],
      [ds0, ds1],
    ] as const) {
      expect(after.metadata?.generation).toBe((before.metadata?.generation ?? 0) + 1); // one template write
      expect(argsOf(after)).toEqual({
        driver: ['--v=4', '--endpoint=unix:///csi/csi.sock'],
        sidecar: ['-v', '4', '--timeout=15s'],
        proxy: ['--upstream=http://127.0.0.1:8080'],
      });
    }
    expect(d1.spec?.template.spec?.schedulingGates ?? []).toEqual([]);
  });

  it('keeps conditions that other controllers write (server-side apply, own field manager)', async () => {
    await http.apply(
      `${crPath}/status`,
      {
        apiVersion: 'operator.openshift.io/v1',
        kind: 'ClusterCSIDriver',
        metadata: { name: DRIVER },
        status: {
          conditions: [
            {
              type: 'HostPathDriverControllerServiceControllerAvailable',
              status: 'True',
              reason: 'AsExpected',
              message: 'written by another controller',
              lastTransitionTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
            },
          ],
        },
      },
      'csi-operator-stand-in',
    );
    const before = await reconcileCount();
    await patchSpec({ operatorLogLevel: 'Debug' });
    await http.patch(crPath, { metadata: { annotations: { 'test/touch': `foreign-${Date.now()}` } } }, PatchType.merge);
    await waitFor('a reconcile after the foreign write', 30_000, async () => (await reconcileCount()) > before);
    const cr = await getCR();
    expect(cond(cr, 'HostPathDriverControllerServiceControllerAvailable')?.message).toBe('written by another controller');
    expect(cond(cr, 'CSIHandoverAvailable')?.status).toBe('True');
  });

  it('reconciling again writes nothing', async () => {
    const [versions, cr0] = await Promise.all([workloadVersions(), getCR()]);
    const before = await reconcileCount();
    // Touching the CR triggers a reconcile without changing the spec.
    await http.patch(crPath, { metadata: { annotations: { 'test/touch': String(Date.now()) } } }, PatchType.merge);
    await waitFor('a reconcile after the touch', 30_000, async () => (await reconcileCount()) > before);
    expect(await workloadVersions()).toEqual(versions);
    expect((await getCR()).status).toEqual(cr0.status);
  });

  it('counts the requests of its own leader election apart from its work', async () => {
    // The leader renews its Lease every retry period (5s by default), whatever its work: one PUT more within 15s.
    const renewals = async () => (await operatorRequests(http, 'leader-election')).get('PUT leases') ?? 0;
    const leasePutsAsWork = async () => (await operatorRequests(http, 'controllers')).get('PUT leases') ?? 0;
    const [before, workBefore] = [await renewals(), await leasePutsAsWork()];
    await waitFor('a renewal of the operator lease', 15_000, async () => (await renewals()) > before);
    // Nothing is handed over meanwhile: a lease PUT counted as work would be a renewal miscounted.
    expect(await leasePutsAsWork(), 'no renewal counted as work').toBe(workBefore);
    const own = await operatorRequests(http, 'leader-election');
    expect(
      [...own.keys()].filter((k) => !k.endsWith(' leases')),
      'leader election touches only leases',
    ).toEqual([]);
    expect((await operatorRequests(http, 'controllers')).get('WATCH pods') ?? 0, 'the controllers watch pods').toBeGreaterThan(0);
  });

  it('an invalid logLevel is rejected by the CRD', async () => {
    await expect(patchSpec({ logLevel: 'Verbose' })).rejects.toThrow(/logLevel/);
    await expect(patchSpec({ managementState: 'Sometimes' })).rejects.toThrow(/managementState/);
  });
});

describe('bad input', () => {
  it('with a CRD that lets a bad value through, goes Degraded naming the field and changes no workload', async () => {
    const crdFile = join(repoRoot, 'crds', 'operator.openshift.io_clustercsidrivers.yaml');
    const crd = parse(readFileSync(crdFile, 'utf8')) as {
      spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, Record<string, unknown>> } } } } }[] };
    };
    const props = crd.spec.versions[0]?.schema.openAPIV3Schema.properties.spec.properties ?? {};
    for (const field of ['logLevel', 'operatorLogLevel', 'managementState']) {
      delete props[field]?.enum;
      delete props[field]?.pattern;
    }
    const permissive = join(localDir, 'permissive-crd.yaml');
    writeFileSync(permissive, stringify(crd));
    const versions = await workloadVersions();
    await kubectl('apply', '-f', permissive);
    try {
      await waitFor('permissive CRD accepts a bad logLevel', 30_000, async () => {
        try {
          await patchSpec({ logLevel: 'Chatty' });
          return true;
        } catch {
          return false;
        }
      });
      const degraded = await waitCondition('CSIHandoverDegraded', 'True', 'InvalidSpec');
      expect(degraded.message).toContain('spec.logLevel');
      expect(degraded.message).toContain('"Chatty"');
      expect(await workloadVersions()).toEqual(versions);
    } finally {
      await patchSpec({ logLevel: 'Debug' });
      await kubectl('apply', '-f', crdFile);
    }
    await waitCondition('CSIHandoverDegraded', 'False', 'AsExpected');
  });
});

describe('management states', () => {
  it('Unmanaged observes and reports but writes no workload', async () => {
    const before = await workloadVersions();
    await patchSpec({ managementState: 'Unmanaged', logLevel: 'TraceAll' });
    const progressing = await waitProgressingMessage('Unmanaged reported', 'Unmanaged', 30_000);
    expect(progressing.message).toContain('--v=8');
    expect(await workloadVersions()).toEqual(before);
  });

  it('Removed stops managing, takes out only what csi-handover added (a template gate of an older version), leaves the driver’s own settings', async () => {
    await putTemplateGate();
    const [d0, ds0] = await Promise.all([getDeployment(), getDaemonSet()]);
    expect(d0.spec?.template.spec?.schedulingGates?.map((g) => g.name)).toContain(HANDOVER_GATE);
    await patchSpec({ managementState: 'Removed' });
    await waitCondition('CSIHandoverAvailable', 'False', 'Removed');
    const d1 = await waitFor('gate removed from the template', 30_000, async () => {
      const d = await getDeployment();
      return (d.spec?.template.spec?.schedulingGates ?? []).length === 0 ? d : undefined;
    });
    expect(argsOf(d1)).toEqual(argsOf(d0)); // the driver's own settings (its current --v) stay
    expect((await getDaemonSet()).metadata?.resourceVersion).toBe(ds0.metadata?.resourceVersion);
    await waitRolloutComplete(http, NS, 'controller', 120_000);
  });

  it('Managed again applies the pending level', async () => {
    await patchSpec({ managementState: 'Managed' });
    await waitFor('deployment at --v=8', 60_000, async () => argsOf(await getDeployment()).driver?.includes('--v=8'));
    await waitRolloutComplete(http, NS, 'controller', 120_000);
    await waitDaemonSetRolled();
    expect(argsOf(await getDaemonSet()).sidecar).toEqual(['-v', '8', '--timeout=15s']);
  });
});

describe('companion mode', () => {
  it('never writes a workload, only reports', async () => {
    await kubectl('-n', OP_NS, 'set', 'env', 'deployment/csi-handover', 'CSI_HANDOVER_MODE=companion');
    await waitRolloutComplete(http, OP_NS, 'csi-handover', 180_000);
    const before = await workloadVersions();
    await patchSpec({ logLevel: 'Normal' });
    const progressing = await waitProgressingMessage('companion report', 'left to the driver operator', 60_000);
    expect(progressing.message).toContain('--v=2');
    expect(await workloadVersions()).toEqual(before);
  });

  it('back in standalone mode, the level is applied', async () => {
    await kubectl('-n', OP_NS, 'set', 'env', 'deployment/csi-handover', 'CSI_HANDOVER_MODE=standalone');
    await waitRolloutComplete(http, OP_NS, 'csi-handover', 180_000);
    await waitFor('deployment at --v=2', 60_000, async () => argsOf(await getDeployment()).driver?.includes('--v=2'));
    await waitRolloutComplete(http, NS, 'controller', 120_000);
  });
});

describe('operator high availability', () => {
  it('when the leader is deleted, the standby leads within a second or so, and no reconcile ever runs on two replicas at once', async () => {
    const leader = await leaderPod();
    const leaderName = leader.metadata?.name ?? '';
    const standby = (await operatorPods(http)).find((p) => p.metadata?.name !== leaderName && !p.metadata?.deletionTimestamp);
    const standbyName = standby?.metadata?.name ?? '';
    expect(standbyName).not.toBe('');
    const recorder = new LeaseRecorder(http, OP_NS, new Set(['csi-handover-leader']), makeLogger('test', 'warn'));
    await recorder.start();
    try {
      await http.request('DELETE', `/api/v1/namespaces/${OP_NS}/pods/${leaderName}`);
      await waitFor('standby leads', 30_000, () => recorder.holder('csi-handover-leader') === standbyName);
    } finally {
      recorder.stop();
    }
    const sigterm = (await sigtermTimes(OP_NS)).get(leaderName);
    const acquired = recorder.observations.find((o) => o.holder === standbyName);
    expect(sigterm).toBeDefined();
    expect(acquired).toBeDefined();
    const failoverMs = (acquired?.t ?? 0) - (sigterm ?? NaN);
    console.log(`operator failover: SIGTERM to ${leaderName} → ${standbyName} leads in ${failoverMs}ms`);
    // Goal: well under a second; the bound leaves a wide margin for a loaded machine. Without the release
    // and the watching standby it would be the lease duration (15s) plus up to a retry.
    expect(failoverMs).toBeLessThan(5_000);
    // The new leader reconciles (work resumes) …
    await patchSpec({ operatorLogLevel: 'Debug', logLevel: 'Debug' });
    await waitFor('deployment at --v=4', 60_000, async () => argsOf(await getDeployment()).driver?.includes('--v=4'));
    // … and across the whole test run, reconcile intervals of different replicas never overlapped.
    const intervals = reconcileIntervals();
    expect(intervals.length).toBeGreaterThan(0);
    for (const a of intervals) {
      for (const b of intervals) {
        if (a.identity !== b.identity) expect(a.end <= b.start || b.end <= a.start, `${a.identity} and ${b.identity} reconciled at once`).toBe(true);
      }
    }
  });
});

function reconcileIntervals(): { identity: string; start: number; end: number }[] {
  const open = new Map<string, number>();
  const out: { identity: string; start: number; end: number }[] = [];
  for (const l of operatorLogs().sort((a, b) => a.time - b.time)) {
    const id = `${l.identity}/${l.driver}`;
    if (l.msg === 'reconcile start') open.set(id, l.time);
    if (l.msg === 'reconcile end') {
      const start = open.get(id);
      if (start !== undefined) out.push({ identity: l.identity ?? '', start, end: l.time });
      open.delete(id);
    }
  }
  // A reconcile cut off by a crash would leave an open interval: treat it as running until now.
  for (const [id, start] of open) out.push({ identity: id.split('/')[0] ?? '', start, end: Date.now() });
  return out;
}

interface LogLine {
  time: number;
  msg: string;
  driver?: string;
  identity?: string;
  level: number;
}
/** Every replica's JSON log lines, read from the nodes as they are written (a deleted pod's too). */
const operatorLogFollower = new PodLogFollower(OP_NS, 'csi-handover');
function operatorLogs(): LogLine[] {
  const out: LogLine[] = [];
  for (const pod of operatorLogFollower.pods()) {
    for (const line of operatorLogFollower.lines(pod)) {
      if (!line.startsWith('{')) continue;
      try {
        out.push(JSON.parse(line) as LogLine);
      } catch {
        // not one of the operator's JSON lines
      }
    }
  }
  return out;
}
const leaderPod = (): Promise<V1Pod> => operatorLeader(http);

/** csi_handover_reconciles_total summed over outcomes, from the leader's /metrics. */
const reconcileCount = () => operatorMetric(http, 'csi_handover_reconciles_total');
