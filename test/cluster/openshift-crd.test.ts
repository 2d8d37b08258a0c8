// On OpenShift the cluster-version operator installs clustercsidrivers.operator.openshift.io from openshift/api,
// and csi-handover meets that CRD, not ours. Here OpenShift's own CRD (../shared/third_party/openshift-api-2a3d739)
// takes the place of ours, as the cluster-version operator would put it, and the sample driver's workloads are
// labelled for a ClusterCSIDriver its name enum allows. Then, in companion mode (the test sets --v as csi-operator
// would) and in standalone mode, two log-level changes each: every status request succeeds, the conditions follow
// each rollout to Progressing=False with the last gap, the CSIHandoverReport holds each lease's gap, `kubectl
// csi-handover status` reads it, a CR made again gets its status at once, and an idle operator writes nothing.
// Last, an admission policy refuses one condition: the rest stays current and the refused part is not sent again.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run as pluginRun } from '../../src/cli/kubectl-csi-handover.js';
import { DRIVER_LABEL } from '../../src/api/names.js';
import { type LogLevel, verbosityFor } from '../../src/loglevel/verbosity.js';
import { PatchType } from '../../src/kube/http.js';
import {
  binDir,
  clusterHttp,
  deploySample,
  kubeconfigPath,
  kubectl,
  SAMPLE_DEPLOYMENT,
  SAMPLE_DRIVER,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE,
  SAMPLE_SNAPSHOT_CONTROLLER,
  waitFor,
} from '../../hack/lib/cluster.js';
import {
  installCrd,
  installOperator,
  OPERATOR_NAMESPACE,
  operatorLeader,
  operatorMetric,
  operatorRequestsTo,
  reportStatus,
  setOperatorMode,
  setSampleCrLevel,
  waitNewSamplePods,
} from '../../hack/lib/operator.js';
import { rolloutComplete, setVerbosityDirectly, waitLeasesHeldBy, waitRolloutComplete } from '../../hack/lib/rollout.js';
import { thirdPartyDir } from '../../hack/lib/third-party.js';

const http = clusterHttp();
const CRD = 'clustercsidrivers.operator.openshift.io';
const OPENSHIFT_CRD = join(thirdPartyDir('openshift-api-2a3d739'), '0000_50_csi-driver_01_clustercsidrivers-Default.crd.yaml');
/** A name OpenShift's CRD allows (it restricts metadata.name to its own drivers'). */
const DRIVER = 'csi.sharedresource.openshift.io';
const CR = `/apis/operator.openshift.io/v1/clustercsidrivers/${DRIVER}`;
const LEASES: string[] = Object.values(SAMPLE_LEASES);
/** The leases a log-level change hands over: the sample's, and the snapshot-controller's where an earlier test file left it labelled for the driver. */
let rolledLeases = LEASES.length;
const POLICY = 'csi-handover-test-refuse-handed-over';

interface Cond {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface DriverCR {
  metadata: { uid?: string; generation?: number };
  status?: { conditions?: Cond[]; observedGeneration?: number; generations?: { name: string }[] };
}
const getCR = () => http.get<DriverCR>(CR);
const cond = (cr: DriverCR, type: string) => cr.status?.conditions?.find((c) => c.type === type);

/** The sample's labelled workloads (controller Deployment, node DaemonSet) move to driver `to`. */
const relabel = (from: string, to: string) =>
  kubectl('-n', SAMPLE_NAMESPACE, 'label', 'deployments,daemonsets', '-l', `${DRIVER_LABEL}=${from}`, `${DRIVER_LABEL}=${to}`, '--overwrite');

async function createCr(logLevel: string): Promise<void> {
  await http.request('POST', '/apis/operator.openshift.io/v1/clustercsidrivers', {
    body: { apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', metadata: { name: DRIVER }, spec: { managementState: 'Managed', logLevel } },
  });
}

/** Every status request the operator leader made so far, by "<verb> <code>", to the CR's status and to the reports. */
async function statusRequests(): Promise<{ ok: Record<string, number>; failed: Record<string, number> }> {
  const ok: Record<string, number> = {};
  const failed: Record<string, number> = {};
  for (const resource of ['clustercsidrivers/status', 'csihandoverreports', 'csihandoverreports/status']) {
    for (const [k, n] of await operatorRequestsTo(http, resource)) {
      if (/ 2\d\d$/.test(k)) ok[resource] = (ok[resource] ?? 0) + n;
      else failed[`${k} ${resource}`] = n;
    }
  }
  return { ok, failed };
}

/**
 * A log-level change and its rollout: the CR's logLevel patched, --v set on the workloads as csi-operator would in
 * companion mode (the operator does it in standalone), until new pods hold every lease and the CR and the report
 * say so. Returns the CR and the report then.
 */
async function changeLevel(logLevel: LogLevel, mode: 'companion' | 'standalone') {
  const before = (await rolloutComplete(http, SAMPLE_NAMESPACE, SAMPLE_DEPLOYMENT)) ?? [];
  await http.patch(CR, { spec: { logLevel } }, PatchType.merge);
  if (mode === 'companion') await setVerbosityDirectly(http, SAMPLE_NAMESPACE, DRIVER, verbosityFor(logLevel));
  const after = await waitNewSamplePods(http, before);
  await waitLeasesHeldBy(http, SAMPLE_NAMESPACE, LEASES, after, 300_000);
  const newHolder = after[0]?.metadata?.name ?? '';
  const report = await waitFor(
    'the report of every lease handed to the new pod',
    60_000,
    async () => {
      const r = await reportStatus(http, DRIVER);
      return LEASES.every((l) => r?.lastRollout?.leases?.some((h) => h.lease === l && h.newHolder === newHolder)) && r;
    },
    500,
  );
  const cr = await waitFor(
    'Progressing=False with the last gap',
    120_000,
    async () => {
      const c = await getCR();
      const p = cond(c, 'CSIHandoverProgressing');
      return p?.status === 'False' && p.reason === 'AsExpected' && p.message?.includes(`last handover: ${rolledLeases} lease(s), largest gap`) && c;
    },
    500,
  );
  return { cr, report, newHolder };
}

beforeAll(async () => {
  await installOperator(http);
  await setOperatorMode(http, 'companion');
  await deploySample('upstream-1replica');
  await setSampleCrLevel(http, 'Normal');
  await setVerbosityDirectly(http, SAMPLE_NAMESPACE, SAMPLE_DRIVER, 2);
  await waitLeasesHeldBy(http, SAMPLE_NAMESPACE, LEASES, await waitRolloutComplete(http, SAMPLE_NAMESPACE, SAMPLE_DEPLOYMENT, 300_000), 300_000);
  // As the cluster-version operator installs it: OpenShift's CRD, in place of ours (which takes its CRs with it).
  await kubectl('delete', 'crd', CRD, '--wait=true');
  await kubectl('create', '-f', OPENSHIFT_CRD);
  await kubectl('wait', '--for=condition=Established', '--timeout=60s', `crd/${CRD}`);
  await relabel(SAMPLE_DRIVER, DRIVER);
  const snapshotController = await http.get<{ metadata?: { labels?: Record<string, string> } }>(
    `/apis/apps/v1/namespaces/${SAMPLE_NAMESPACE}/deployments/${SAMPLE_SNAPSHOT_CONTROLLER.deployment}`,
  );
  if (snapshotController.metadata?.labels?.[DRIVER_LABEL] === DRIVER) rolledLeases += 1;
  await createCr('Normal');
  await waitFor('the operator’s conditions on the CR', 60_000, async () => cond(await getCR(), 'CSIHandoverAvailable')?.status === 'True', 500);
}, 900_000);

afterAll(async () => {
  await kubectl('delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', POLICY, '--ignore-not-found');
  // Ours back, for the other tests: OpenShift's CRD goes with its CRs.
  await kubectl('delete', 'crd', CRD, '--wait=true', '--ignore-not-found');
  await installCrd();
  await relabel(DRIVER, SAMPLE_DRIVER);
  await setOperatorMode(http, 'standalone');
}, 300_000);

describe("companion mode on OpenShift's ClusterCSIDriver CRD", () => {
  let leader = '';

  it('two log-level changes: every status request succeeds; the conditions follow each rollout; the report holds each gap', async () => {
    leader = (await operatorLeader(http)).metadata?.name ?? '';
    const failuresBefore = await operatorMetric(http, 'csi_handover_status_write_failures_total');
    for (const level of ['Debug', 'Normal'] as const) {
      const { cr, report, newHolder } = await changeLevel(level, 'companion');
      console.log(`${level}: ${cond(cr, 'CSIHandoverProgressing')?.message} | ${cond(cr, 'CSIHandoverLeasesHandedOver')?.message}`);
      expect(cond(cr, 'CSIHandoverAvailable')?.status).toBe('True');
      expect(cond(cr, 'CSIHandoverDegraded')?.status).toBe('False');
      expect(cond(cr, 'CSIHandoverLeasesHandedOver')).toMatchObject({ status: 'True', reason: 'ReleasedByOperator' });
      expect(cond(cr, 'CSIHandoverLeasesHandedOver')?.message).toMatch(/largest gap \d+\.\ds/);
      for (const lease of LEASES) {
        const h = report.lastRollout?.leases?.find((l) => l.lease === lease);
        expect(h?.newHolder, lease).toBe(newHolder);
        expect(h?.gapSeconds, `${lease}'s gap`).toBeGreaterThan(0);
      }
      // Companion mode takes no field csi-operator owns.
      expect(cr.status?.observedGeneration).toBeUndefined();
      expect(cr.status?.generations).toBeUndefined();
    }
    expect((await operatorLeader(http)).metadata?.name, 'one leader throughout (its counters are what is read)').toBe(leader);
    const requests = await statusRequests();
    expect(requests.failed, 'status requests answered with an error').toEqual({});
    expect(requests.ok['clustercsidrivers/status']).toBeGreaterThan(0);
    expect(requests.ok['csihandoverreports/status']).toBeGreaterThan(0);
    expect(await operatorMetric(http, 'csi_handover_status_write_failures_total')).toBe(failuresBefore);
  });

  it('kubectl csi-handover status reads the report', async () => {
    let out = '';
    const kubectlBin = async (args: string[]) =>
      (await promisify(execFile)(join(binDir, 'kubectl'), args, { env: { ...process.env, KUBECONFIG: kubeconfigPath }, maxBuffer: 64 << 20 })).stdout;
    await pluginRun(['status', DRIVER], kubectlBin, (s) => (out += s));
    const report = await reportStatus(http, DRIVER);
    for (const h of report?.lastRollout?.leases ?? []) {
      expect(out).toMatch(new RegExp(`${h.namespace}/${h.lease}\\s+${h.oldHolder}\\s+→\\s+${h.newHolder}\\s+\\S+s\\s+${h.releasedBy}`));
    }
    expect(out).toMatch(/CSIHandoverProgressing\s+False/);
  });

  it('an idle operator writes no status', async () => {
    const before = await statusRequests();
    // A metadata-only touch of the CR and of a workload each make it reconcile, with nothing new to say.
    await http.patch(CR, { metadata: { annotations: { 'test/touch': String(Date.now()) } } }, PatchType.merge);
    await kubectl('-n', SAMPLE_NAMESPACE, 'annotate', '--overwrite', `deployment/${SAMPLE_DEPLOYMENT}`, `test/touch=${Date.now()}`);
    const reconciles = () => operatorMetric(http, 'csi_handover_reconciles_total{controller="clustercsidriver",outcome="success"}');
    const r0 = await reconciles();
    await waitFor('a reconcile of the touched driver', 30_000, async () => (await reconciles()) > r0, 500);
    await new Promise((r) => setTimeout(r, 10_000)); // an idle window: anything it would write comes within the 3 s batch
    expect(await statusRequests()).toEqual(before);
  });

  it('a CR deleted and created again gets its status within 10 s, starting clean', async () => {
    const old = await getCR();
    await http.request('DELETE', CR);
    await waitFor(
      'the CR gone',
      30_000,
      () =>
        getCR().then(
          () => false,
          () => true,
        ),
      200,
    );
    const created = Date.now();
    await createCr('Normal');
    const cr = await waitFor(
      'the new CR’s conditions',
      10_000,
      async () => {
        const c = await getCR();
        return cond(c, 'CSIHandoverAvailable') && cond(c, 'CSIHandoverProgressing') && c;
      },
      200,
    );
    console.log(`status ${Date.now() - created} ms after the CR was created again`);
    expect(cr.metadata.uid).not.toBe(old.metadata.uid);
    // The report of the old CR is not the new one's: no handover seen for it yet.
    expect(cond(cr, 'CSIHandoverLeasesHandedOver')).toMatchObject({ status: 'Unknown', reason: 'NoHandoverYet' });
    expect(cond(cr, 'CSIHandoverProgressing')?.message).not.toContain('last handover');
    expect(await reportStatus(http, DRIVER)).toBeUndefined();
  });
});

describe('a status field the API server refuses', () => {
  it('leaves the other conditions current, is logged once, counted, told in an Event and not sent again', async () => {
    const leader = (await operatorLeader(http)).metadata?.name ?? '';
    // A policy's denial comes as 403 or 422 (its reason decides): either is a refusal.
    const refused = async () =>
      (await operatorMetric(http, 'csi_handover_status_write_failures_total{resource="clustercsidrivers",reason="forbidden"}')) +
      (await operatorMetric(http, 'csi_handover_status_write_failures_total{resource="clustercsidrivers",reason="invalid"}'));
    const refusedBefore = await refused();
    await http.apply(
      `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${POLICY}`,
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name: POLICY },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            resourceRules: [{ apiGroups: ['operator.openshift.io'], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['clustercsidrivers/status'] }],
          },
          validations: [
            {
              expression:
                "!has(object.status) || !has(object.status.conditions) || !object.status.conditions.exists(c, c.type == 'CSIHandoverLeasesHandedOver')",
              message: 'this cluster does not take a CSIHandoverLeasesHandedOver condition',
            },
          ],
        },
      },
      'csi-handover-test',
    );
    await http.apply(
      `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${POLICY}`,
      {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name: POLICY },
        spec: { policyName: POLICY, validationActions: ['Deny'] },
      },
      'csi-handover-test',
    );
    // The policy is in force once a write with the condition is refused.
    await waitFor(
      'the policy in force',
      30_000,
      async () => {
        const probe = {
          apiVersion: 'operator.openshift.io/v1',
          kind: 'ClusterCSIDriver',
          metadata: { name: DRIVER },
          status: { conditions: [{ type: 'CSIHandoverLeasesHandedOver', status: 'Unknown', reason: 'Probe', lastTransitionTime: '2026-01-01T00:00:00Z' }] },
        };
        return http.patch(`${CR}/status`, probe, PatchType.apply, { fieldManager: 'csi-handover-test-probe', force: true, dryRun: 'All' }).then(
          () => false,
          (err: unknown) => /does not take/.test(String(err)),
        );
      },
      500,
    );
    const { cr } = await changeLevel('Debug', 'companion');
    // The rest is current: the rollout is reported done, with the gap; the refused condition is not there.
    expect(cond(cr, 'CSIHandoverAvailable')?.status).toBe('True');
    expect(cond(cr, 'CSIHandoverLeasesHandedOver')).toBeUndefined();
    const refusals = (await refused()) - refusedBefore;
    expect(refusals).toBeGreaterThan(0);
    expect((await operatorLeader(http)).metadata?.name).toBe(leader);
    // Not sent again: reconciles with nothing new refuse nothing more and write nothing.
    const requests = await statusRequests();
    await http.patch(CR, { metadata: { annotations: { 'test/touch': `refused-${Date.now()}` } } }, PatchType.merge);
    await new Promise((r) => setTimeout(r, 10_000));
    expect(await statusRequests()).toEqual(requests);
    expect((await refused()) - refusedBefore).toBe(refusals);
    // Logged once per refused content, told in an Event.
    const logs = await kubectl('-n', OPERATOR_NAMESPACE, 'logs', leader, '--since=10m');
    const logged = logs.split('\n').filter((l) => l.includes('status write refused') && l.includes(DRIVER));
    expect(logged).toHaveLength(refusals);
    const events = await kubectl('get', 'events', '-n', 'default', '--field-selector', `reason=StatusWriteRefused,involvedObject.name=${DRIVER}`, '-o', 'name');
    expect(events.trim().split('\n').filter(Boolean).length).toBeGreaterThan(0);
    await kubectl('delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', POLICY);
  });
});

describe("standalone mode on OpenShift's ClusterCSIDriver CRD", () => {
  it('two log-level changes: it writes --v, every status request succeeds, observedGeneration and generations follow', async () => {
    // Whatever the refusal case left: this case writes every part.
    await kubectl('delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', POLICY, '--ignore-not-found');
    await setOperatorMode(http, 'standalone');
    const leader = (await operatorLeader(http)).metadata?.name ?? '';
    for (const level of ['Normal', 'Debug'] as const) {
      const { cr, report } = await changeLevel(level, 'standalone');
      expect(cond(cr, 'CSIHandoverLeasesHandedOver')).toMatchObject({ status: 'True' });
      expect(report.lastRollout?.leases?.every((l) => (l.gapSeconds ?? 0) > 0)).toBe(true);
      const settled = await waitFor('observedGeneration', 30_000, async () => {
        const c = await getCR();
        return c.status?.observedGeneration === c.metadata.generation && c;
      });
      expect(settled.status?.generations?.map((g) => g.name)).toEqual(expect.arrayContaining([SAMPLE_DEPLOYMENT, 'csi-hostpath-node']));
    }
    expect((await operatorLeader(http)).metadata?.name).toBe(leader);
    expect((await statusRequests()).failed).toEqual({});
    expect(await operatorMetric(http, 'csi_handover_status_write_failures_total')).toBe(0);
  });
});
