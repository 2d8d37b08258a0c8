// Installing the operator on the local cluster from config/ (as pods under its own service account and
// RBAC), switching its mode, and finding its leader — shared by the cluster tests, the demo and benchmarks.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1DaemonSet, V1Deployment, V1Lease, V1Pod } from '@kubernetes/client-node';
import { HandoverReportObject, reportOwnerUid, reportPath } from '../../src/api/handover-report.js';
import { HANDOVER_GATE } from '../../src/api/names.js';
import { type HandoverReport, reportFromStatus } from '../../src/handover/report.js';
import { isLogLevel, verbosityFor } from '../../src/loglevel/verbosity.js';
import { type KubeHttp, PatchType } from '../../src/kube/http.js';
import { isConflict, isNotFound } from '../../src/kube/errors.js';
import { parseMetrics } from '../bench/scale-stats.js';
import {
  applyKustomization,
  deploySample,
  kubectl,
  kubectlOnObjects,
  renderKustomization,
  type SampleOverlay,
  localDir,
  repoRoot,
  SAMPLE_DEPLOYMENT,
  SAMPLE_DRIVER,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE,
  SAMPLE_SNAPSHOT_CONTROLLER,
  waitFor,
} from './cluster.js';
import { deploymentPath, rolloutComplete, rolloutRestart, waitLeasesHeldBy, waitRolloutComplete } from './rollout.js';

export const OPERATOR_NAMESPACE = 'csi-handover';

export async function installOperator(http: KubeHttp): Promise<void> {
  // On a reused cluster the image may have been rebuilt under the same tag since its pods started: the template
  // names the tarball, so they roll. In the same apply, so a fresh install starts one set of pods, not two.
  const image = importedOperatorImage();
  await dropOperatorLeaseIfNoReplica(http);
  await applyKustomization(join(repoRoot, 'config', 'default'), (o) => {
    const template = o.kind === 'Deployment' && o.metadata.name === 'csi-handover' ? o.spec?.template : undefined;
    if (image && template) template.metadata = { ...template.metadata, annotations: { ...template.metadata?.annotations, [IMAGE_ANNOTATION]: image } };
  });
  await kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/clustercsidrivers.operator.openshift.io');
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
  // Installed means leading: an install that replaced another (Helm, the OLM bundle) may find the Lease still held
  // by a pod that is gone (it could not release it); a replica takes it when it expires.
  await waitOperatorLeading(http);
}

/**
 * With no operator pod left, nothing can hold the operator Lease: a holder named in it died without releasing it (an
 * uninstall that took the RBAC away while the pods stopped: `helm uninstall`, the OLM test's teardown), and the
 * install that follows would wait out its expiry (15 s). Deleted, with the version read, as an admin would.
 */
async function dropOperatorLeaseIfNoReplica(http: KubeHttp): Promise<void> {
  const ns = await http.get(`/api/v1/namespaces/${OPERATOR_NAMESPACE}`).catch(() => undefined);
  if (!ns || (await operatorPods(http)).length > 0) return;
  const path = `/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/leases/csi-handover-leader`;
  const lease = await http.get<V1Lease>(path).catch(() => undefined);
  if (!lease?.spec?.holderIdentity) return;
  await deleteLeaseAsRead(http, path, lease);
}

/** Deletes the Lease at `path` only if it is still the version `read` (a holder that took it since keeps it). */
async function deleteLeaseAsRead(http: KubeHttp, path: string, read: V1Lease): Promise<void> {
  await http.request('DELETE', path, { body: { preconditions: { resourceVersion: read.metadata?.resourceVersion } } }).catch((err: unknown) => {
    if (!isConflict(err) && !isNotFound(err)) throw err;
  });
}

/**
 * Until an operator replica that is not being deleted holds the operator Lease: after a restart the old leader,
 * still listed while it terminates, releases the Lease on its way out and a new replica takes it a moment later.
 */
export async function waitOperatorLeading(http: KubeHttp): Promise<void> {
  await waitFor(
    'an operator replica to lead',
    60_000,
    () =>
      operatorLeader(http).then(
        (p) => p.metadata?.deletionTimestamp == null,
        () => false,
      ),
    250,
  );
}

const IMAGE_ANNOTATION = 'csi-handover.local/image-tarball';

/** The operator image tarball the nodes imported last (hack/nodes.sh keeps it per tag), by its content-keyed name. */
function importedOperatorImage(): string | undefined {
  const file = join(localDir, 'nodes', 'node-1', 'images-imported');
  if (!existsSync(file)) return undefined;
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('csi-handover.local/csi-handover:dev '));
  return lines.at(-1)?.split(' ')[1]?.split('/').pop();
}

export const SAMPLE_CR_PATH = `/apis/operator.openshift.io/v1/clustercsidrivers/${SAMPLE_DRIVER}`;
/** The sample overlays' `--v` values and the CR log levels that ask for them. */
export const LEVELS: Record<number, string> = { 2: 'Normal', 4: 'Debug' };

/**
 * The sample driver's CR Managed, at `level` if it is created here, else at the level it has: for a file that
 * needs no particular level, a rollout fewer than setting one.
 */
export function ensureSampleCr(http: KubeHttp, level: string): Promise<void> {
  return createOrPatchSampleCr(http, { managementState: 'Managed', logLevel: level }, { managementState: 'Managed' });
}

/** Creates the sample driver's CR (Managed, at `level`), or on 409 sets that level on the existing one. */
export function setSampleCrLevel(http: KubeHttp, level: string): Promise<void> {
  const spec = { managementState: 'Managed', logLevel: level };
  return createOrPatchSampleCr(http, spec, spec);
}

/** Creates the sample driver's CR with `spec`, or on 409 merges `existing` into the spec of the one there. */
async function createOrPatchSampleCr(http: KubeHttp, spec: object, existing: object): Promise<void> {
  await http
    .request('POST', '/apis/operator.openshift.io/v1/clustercsidrivers', {
      body: { apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', metadata: { name: SAMPLE_DRIVER }, spec },
    })
    .catch(async (err: unknown) => {
      if (!isConflict(err)) throw err;
      await http.patch(SAMPLE_CR_PATH, { spec: existing }, PatchType.merge);
    });
}

/**
 * What an admin does for each driver namespace (config/rbac/driver_cluster_role.yaml): binds ClusterRole
 * csi-handover-driver there, so the operator may release Leases, patch pods and set --v in it. Idempotent.
 */
export async function grantDriverNamespace(http: KubeHttp, namespace: string): Promise<void> {
  await http.apply(
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings/csi-handover-driver`,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'csi-handover-driver', namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'csi-handover-driver' },
      subjects: [{ kind: 'ServiceAccount', name: 'csi-handover', namespace: OPERATOR_NAMESPACE }],
    },
    'csi-handover-tests',
  );
}

/** The ClusterCSIDriver CRD alone (config/crd), for writing a CR before the operator is installed. */
export async function installCrd(): Promise<void> {
  await kubectl('apply', '-k', join(repoRoot, 'config', 'crd'));
  await kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/clustercsidrivers.operator.openshift.io');
}

/** A lease as a CSIHandoverReport's status lists it (the raw shape, as users read it). */
export interface ReportedLease {
  lease: string;
  namespace: string;
  oldHolder: string;
  newHolder: string;
  releasedBy: string;
  stopTime?: string;
  releaseTime?: string;
  acquireTime?: string;
  gapSeconds?: number;
}
export interface ReportStatus {
  lastRollout?: { largestGap?: string; leases?: ReportedLease[] };
  totals?: { handovers: number; releasedByOperator: number; releasedByHolder: number; expired: number };
}

/** A driver's CSIHandoverReport status, if there is a report and it belongs to the driver's CR of now. */
export async function reportStatus(http: KubeHttp, driver: string): Promise<ReportStatus | undefined> {
  const [cr, report] = await Promise.all([
    http.get<{ metadata?: { uid?: string } }>(`/apis/operator.openshift.io/v1/clustercsidrivers/${driver}`).catch(() => undefined),
    http.get<unknown>(reportPath(driver)).catch(() => undefined),
  ]);
  const parsed = HandoverReportObject.safeParse(report);
  if (!cr || !parsed.success || reportOwnerUid(parsed.data) !== cr.metadata?.uid) return undefined;
  return parsed.data.status as ReportStatus | undefined;
}

/** The sample driver's handover report (its CSIHandoverReport), if there is one. */
export async function sampleReport(http: KubeHttp): Promise<HandoverReport | undefined> {
  return reportFromStatus(await reportStatus(http, SAMPLE_DRIVER));
}

/**
 * The sample driver at rest: the CR's log level is in its controller's template (the operator has written it),
 * the rollout is done and its pods hold every lease. Returns those pods.
 */
export async function settledSample(http: KubeHttp): Promise<V1Pod[]> {
  await waitFor('the CR log level in the template', 60_000, async () => {
    const cr = await http.get<{ spec?: { logLevel?: string } }>(SAMPLE_CR_PATH).catch(() => undefined);
    const level = cr?.spec?.logLevel ?? '';
    const want = `--v=${verbosityFor(isLogLevel(level) ? level : '')}`;
    const d = await http.get<V1Deployment>(deploymentPath(SAMPLE_NAMESPACE, SAMPLE_DEPLOYMENT));
    return (d.spec?.template.spec?.containers ?? []).every((c) => c.args?.includes(want));
  });
  const pods = await waitRolloutComplete(http, SAMPLE_NAMESPACE, SAMPLE_DEPLOYMENT, 300_000);
  // The snapshot-controller's too: a template change while its rollout is under way deletes a pod just started.
  await waitRolloutComplete(http, SAMPLE_NAMESPACE, SAMPLE_SNAPSHOT_CONTROLLER.deployment, 300_000);
  await waitLeasesHeldBy(http, SAMPLE_NAMESPACE, Object.values(SAMPLE_LEASES), pods, 300_000);
  return pods;
}

/**
 * Deletes the sample's `lease` if the pod it names no longer exists, and says so. An earlier test file that rolled
 * an unmanaged Deployment (the snapshot-controller before handover.test labels it) leaves its lease held by a pod
 * that is gone, which nobody can prove dead and nothing releases: each new pod then waits a whole lease duration
 * from its own first sight of it (137 s and its retry under OpenShift's timings; the nodes' record of the clean-clone
 * CI of 2026-12-06 shows the snapshot-controller test waiting out exactly that). As an admin would, the test deletes
 * it, with the version it read, so a holder that just took it keeps it.
 */
export async function dropLeaseOfGonePod(http: KubeHttp, lease: string): Promise<void> {
  const path = `/apis/coordination.k8s.io/v1/namespaces/${SAMPLE_NAMESPACE}/leases/${lease}`;
  const current = await http.get<V1Lease>(path).catch(() => undefined);
  const holder = current?.spec?.holderIdentity;
  if (!current || !holder) return;
  const gone = await http.get<V1Pod>(`/api/v1/namespaces/${SAMPLE_NAMESPACE}/pods/${holder}`).then(
    () => false,
    (err: unknown) => isNotFound(err),
  );
  if (!gone) return;
  console.log(`${lease}: held by ${holder}, a pod that no longer exists: deleted`);
  await deleteLeaseAsRead(http, path, current);
}

/** deploySample at the level the sample's CR asks for (as the operator would write it), or as it is without a CR. */
export async function deploySampleAtCrLevel(http: KubeHttp, overlay: SampleOverlay, restart = false): Promise<void> {
  const cr = await http.get<{ spec?: { logLevel?: string; managementState?: string } }>(SAMPLE_CR_PATH).catch(() => undefined);
  const level = cr?.spec?.logLevel ?? '';
  await deploySample(overlay, cr?.spec?.managementState === 'Managed' ? verbosityFor(isLogLevel(level) ? level : '') : undefined, restart);
}

/** The settled sample driver's leader: the first of its pods (the 1-replica overlays have no other). */
export async function settledSampleLeader(http: KubeHttp): Promise<V1Pod> {
  const [leader] = await settledSample(http);
  if (!leader) throw new Error('the sample driver has no pod');
  return leader;
}

/**
 * The sample driver's `overlay`, settled at `level` (without one, at the level its CR has, Normal for a new CR), with
 * the operator in standalone mode keeping it there. One template change at a time: the overlay is applied at the
 * CR's level as it is and settles, then the new level is set and settles (see deploySample).
 */
export async function sampleAt(http: KubeHttp, overlay: SampleOverlay, level?: string): Promise<V1Pod[]> {
  await ensureSampleCr(http, level ?? 'Normal');
  await deploySampleAtCrLevel(http, overlay);
  const pods = await settledSample(http);
  if (level === undefined) return pods;
  await setSampleCrLevel(http, level);
  return settledSample(http);
}

/** The operator (standalone) and the 1-replica sample driver at `level`, settled: the usual start of a test file. */
export async function standaloneSampleAt(http: KubeHttp, level: string): Promise<V1Pod[]> {
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  return sampleAt(http, 'upstream-1replica', level);
}

/** The sample controller's pods once a rollout is complete and none of them is one of `before`. */
export function waitNewSamplePods(http: KubeHttp, before: readonly V1Pod[]): Promise<V1Pod[]> {
  return waitFor(
    'the new controller pods',
    300_000,
    async () => {
      const pods = await rolloutComplete(http, SAMPLE_NAMESPACE, SAMPLE_DEPLOYMENT);
      return !!pods?.length && pods.every((p) => !before.some((b) => b.metadata?.name === p.metadata?.name)) && pods;
    },
    500,
  );
}

/**
 * A log-level change of the settled sample driver (a rollout of its controller) and, once the new pod holds every
 * lease, the CR's report of that handover: the report and the new holder.
 */
export async function handOverByLevel(http: KubeHttp, level: string): Promise<{ report: HandoverReport; newHolder: string }> {
  const leases: string[] = Object.values(SAMPLE_LEASES);
  const before = await settledSample(http);
  await setSampleCrLevel(http, level);
  const after = await waitNewSamplePods(http, before);
  await waitLeasesHeldBy(http, SAMPLE_NAMESPACE, leases, after, 300_000);
  const newHolder = after[0]?.metadata?.name ?? '';
  const report = await waitFor(
    'the CR to report every lease handed to the new pod',
    60_000,
    async () => {
      const r = await sampleReport(http);
      return r && leases.every((l) => r.leases.some((h) => h.lease === l && h.newHolder === newHolder)) && r;
    },
    500,
  );
  return { report, newHolder };
}

/**
 * Takes away the kustomize install (config/default) but its Namespace and CRD, for a test that installs the same
 * objects another way (Helm, the OLM bundle); installOperator puts it back.
 */
export async function removeKustomizeInstall(http: KubeHttp): Promise<void> {
  const objs = await renderKustomization(join(repoRoot, 'config', 'default'));
  // The Deployment first, so that its replicas, still allowed to, release the operator Lease as they stop.
  await kubectl('-n', OPERATOR_NAMESPACE, 'delete', 'deployment', 'csi-handover', '--ignore-not-found', '--wait=true');
  await waitOperatorPodsGone(http);
  await kubectlOnObjects(
    objs.filter((o) => o.kind !== 'Namespace' && o.kind !== 'CustomResourceDefinition'),
    'delete',
    '--ignore-not-found',
    '--wait=true',
  );
}

/** Switches standalone/companion (a rollout of the operator itself) and waits for it; no-op when already there. */
export async function setOperatorMode(http: KubeHttp, mode: 'standalone' | 'companion'): Promise<void> {
  await setOperatorEnv(http, `CSI_HANDOVER_MODE=${mode}`);
}

/** `kubectl set env` on the operator (`NAME=value`, or `NAME-` to unset) and waits for its rollout; no-op when unchanged. */
export async function setOperatorEnv(http: KubeHttp, ...assignments: string[]): Promise<void> {
  await kubectl('-n', OPERATOR_NAMESPACE, 'set', 'env', 'deployment/csi-handover', ...assignments);
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
}

/**
 * Replaces the operator's pods and waits for a new one to lead: what it learned in memory (a workload whose
 * early-started pod lost the race for its lease is gated again for ten minutes) is gone with them.
 */
export async function restartOperator(http: KubeHttp): Promise<void> {
  await rolloutRestart(http, OPERATOR_NAMESPACE, 'csi-handover');
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
  await waitOperatorLeading(http);
}

/** Waits until no operator pod is left (after a delete or a scale to zero). */
export async function waitOperatorPodsGone(http: KubeHttp): Promise<void> {
  await waitFor('operator pods gone', 120_000, async () => (await operatorPods(http)).length === 0);
}

export async function operatorPods(http: KubeHttp): Promise<V1Pod[]> {
  return (await http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/pods`, { labelSelector: 'app.kubernetes.io/name=csi-handover' })).items;
}

export async function operatorLeader(http: KubeHttp): Promise<V1Pod> {
  const lease = await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/leases/csi-handover-leader`);
  const leader = (await operatorPods(http)).find((p) => p.metadata?.name === lease.spec?.holderIdentity);
  if (!leader) throw new Error(`operator leader ${lease.spec?.holderIdentity} is not a running operator pod`);
  return leader;
}

/**
 * Takes the operator away (its Deployment, its webhook; CRD and RBAC stay): for the "without csi-handover"
 * scenarios. The operator lifts every gate it placed on its way out; a gate an older version left in a
 * template is taken out here (nobody would lift it on the pods it makes).
 */
export async function uninstallOperator(http: KubeHttp, drivers: { namespace: string; deployment: string }[]): Promise<void> {
  await uninstallWitness();
  await kubectl('delete', 'mutatingwebhookconfiguration', 'csi-handover', '--ignore-not-found');
  await kubectl('-n', OPERATOR_NAMESPACE, 'delete', 'deployment', 'csi-handover', '--ignore-not-found', '--wait=true');
  await waitOperatorPodsGone(http);
  for (const { namespace, deployment } of drivers) await removeHandoverGate(http, namespace, deployment);
  for (const namespace of new Set(drivers.map((d) => d.namespace))) {
    const list = await http.get<{ items: V1Deployment[] }>(`/apis/apps/v1/namespaces/${namespace}/deployments`);
    for (const d of list.items) {
      if (d.spec?.template.spec?.schedulingGates?.some((g) => g.name === HANDOVER_GATE)) await removeHandoverGate(http, namespace, d.metadata?.name ?? '');
    }
  }
}

/** Takes the operator's handover gate out of a Deployment's pod template, if it is there (and the Deployment). */
export async function removeHandoverGate(http: KubeHttp, namespace: string, deployment: string): Promise<void> {
  let d: V1Deployment;
  try {
    d = await http.get<V1Deployment>(deploymentPath(namespace, deployment));
  } catch {
    return;
  }
  const i = (d.spec?.template.spec?.schedulingGates ?? []).findIndex((g) => g.name === HANDOVER_GATE);
  if (i >= 0) {
    await http.patch(
      deploymentPath(namespace, deployment),
      [
        { op: 'test', path: `/spec/template/spec/schedulingGates/${i}/name`, value: HANDOVER_GATE },
        { op: 'remove', path: `/spec/template/spec/schedulingGates/${i}` },
      ],
      PatchType.json,
    );
  }
}

/** The operator leader's /metrics text (served on its pod IP). */
async function leaderMetricsText(http: KubeHttp): Promise<string> {
  const leader = await operatorLeader(http);
  return (await fetch(`http://${leader.status?.podIP}:8080/metrics`)).text();
}

/**
 * The sum of the samples of one metric series on the operator leader's /metrics.
 * `series` is a metric name, optionally with a label set: `csi_handover_reconciles_total` sums every label
 * set, `csi_handover_refused_releases_total{reason="force-deleted"}` reads that one; absent counts as 0.
 */
export async function operatorMetric(http: KubeHttp, series: string): Promise<number> {
  return sumOf(await leaderMetricsText(http), series);
}

/** Several series from one scrape (a scrape resets some, as prom-client's event-loop delay). */
export async function operatorMetrics(http: KubeHttp, series: readonly string[]): Promise<number[]> {
  const text = await leaderMetricsText(http);
  return series.map((s) => sumOf(text, s));
}

function sumOf(text: string, series: string): number {
  const matches = (line: string) => (series.includes('{') ? line.startsWith(`${series} `) : line.startsWith(`${series} `) || line.startsWith(`${series}{`));
  return text
    .split('\n')
    .filter(matches)
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

/**
 * The operator leader's API requests so far, from csi_handover_api_requests_total: `"<verb> <resource>"` →
 * count (every status code summed); only those of `caller` (`leader-election`, `controllers`) when given.
 */
export async function operatorRequests(http: KubeHttp, caller?: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const s of parseMetrics(await leaderMetricsText(http))) {
    if (s.name !== 'csi_handover_api_requests_total' || (caller !== undefined && s.labels.caller !== caller)) continue;
    const key = `${s.labels.verb} ${s.labels.resource}`;
    out.set(key, (out.get(key) ?? 0) + s.value);
  }
  return out;
}

/**
 * The operator leader's requests to one resource (as csi_handover_api_requests_total names it, e.g.
 * `clustercsidrivers/status`) so far, by `"<verb> <code>"`: what it wrote there and how each was answered.
 */
export async function operatorRequestsTo(http: KubeHttp, resource: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const s of parseMetrics(await leaderMetricsText(http))) {
    if (s.name !== 'csi_handover_api_requests_total' || s.labels.resource !== resource) continue;
    const key = `${s.labels.verb} ${s.labels.code}`;
    out.set(key, (out.get(key) ?? 0) + s.value);
  }
  return out;
}

export const WITNESS_NAMESPACE = 'csi-handover-witness';
const witnessDs = `/apis/apps/v1/namespaces/${WITNESS_NAMESPACE}/daemonsets/csi-handover-witness`;

/** Whether the node witness's DaemonSet has a ready, current pod on every node it wants. */
export async function witnessesReady(http: KubeHttp): Promise<boolean> {
  const ds = await http.get<V1DaemonSet>(witnessDs);
  const s = ds.status;
  return (
    (s?.observedGeneration ?? 0) >= (ds.metadata?.generation ?? 1) &&
    (s?.desiredNumberScheduled ?? 0) > 0 &&
    s?.numberReady === s?.desiredNumberScheduled &&
    s?.updatedNumberScheduled === s?.desiredNumberScheduled
  );
}

/** Installs the node witness (config/witness) and waits for a ready witness on every node. */
export async function installWitness(http: KubeHttp): Promise<void> {
  await kubectl('apply', '-k', join(repoRoot, 'config', 'witness'));
  await waitFor('a ready witness on every node', 120_000, () => witnessesReady(http).catch(() => false), 500);
}

export async function uninstallWitness(): Promise<void> {
  await kubectl('delete', '-k', join(repoRoot, 'config', 'witness'), '--ignore-not-found', '--wait=true');
}
