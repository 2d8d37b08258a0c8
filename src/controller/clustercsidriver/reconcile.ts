// The ClusterCSIDriver reconcile: level-based, one driver name per call. Reads the CR and the driver's labelled
// workloads from the informer caches and asks what it may write, plans (./plan.ts), rewrites the pod templates
// the plan names — each on the version the cache holds, so a conflict goes back to the queue — and reports: its
// conditions on the CR and the full report in its CSIHandoverReport (./status-writer.ts).
import type { V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ClusterCSIDriver, type Condition, type GenerationStatus } from '../../api/clustercsidriver.js';
import { type Clock, kubeTime } from '../../clock.js';
import { type HandoverReport, handoverStatus } from '../../handover/report.js';
import { DENIAL_REMEMBERED_MS, describeNeed, type WriteAccess } from '../../kube/access.js';
import { type KubeHttp } from '../../kube/http.js';
import { refusalOf } from '../../kube/errors.js';
import { sameContent } from '../../kube/same-content.js';
import type { ReconcileResult } from '../../kube/workqueue.js';
import type { Metrics } from '../../metrics.js';
import { conditionsUpToDate, type DriverObservation, driverConditions, HANDED_OVER } from '../../status/conditions.js';
import type { StatusPart } from '../../status/status-parts.js';
import type { StatusWriter } from './status-writer.js';
import { daemonSetProgress, deploymentProgress } from '../../status/workload-progress.js';
import { type DeniedWrites, generationOf, type Mode, planDriver, type TemplateWrite, type Workload, workloadRef, writeNeedsOf } from './plan.js';

export interface DriverContext {
  http: KubeHttp;
  log: Logger;
  metrics: Metrics;
  mode: Mode;
  namespacesDescription: string;
  getDriver(name: string): unknown;
  workloadsOf(driver: string): Workload[];
  /** Labelled objects of kinds the operator does not manage (StatefulSets), as "Kind namespace/name". */
  unmanagedOf?(driver: string): string[];
  handoverReport(driver: string): HandoverReport | undefined;
  /** The driver's CSIHandoverReport as stored: the UID of the CR it belongs to and its status. */
  storedReport(driver: string): { uid: string | undefined; ownerUid: string | undefined; status: unknown } | undefined;
  statusWriter: StatusWriter;
  /** Whether the operator may write in a namespace (undefined: not asked, e.g. in tests without RBAC). */
  access?: WriteAccess;
  now: Clock;
}

/** After a conflict the watch brings the workload's new version; looked at again then, or after this. */
const CONFLICT_RETRY_MS = 1_000;

const progressOf = (w: Workload) => (w.kind === 'Deployment' ? deploymentProgress(w.obj) : daemonSetProgress(w.obj));

export async function reconcileDriver(name: string, ctx: DriverContext): Promise<ReconcileResult> {
  const raw = ctx.getDriver(name);
  if (raw === undefined) return;
  const parsed = ClusterCSIDriver.safeParse(raw);
  if (!parsed.success) {
    ctx.log.error({ driver: name, issues: parsed.error.issues }, 'ClusterCSIDriver is not readable; leaving it alone');
    return;
  }
  const cr = parsed.data;
  const log = ctx.log.child({ driver: name });
  const workloads = ctx.workloadsOf(name);
  const noWriteAccess = await deniedWrites(writeNeedsOf(cr, ctx.mode, workloads), ctx.access);
  if (noWriteAccess.length) log.warn({ denied: noWriteAccess }, "no write access in the driver's namespaces: bind ClusterRole csi-handover-driver there");
  const plan = planDriver({
    cr,
    mode: ctx.mode,
    namespacesDescription: ctx.namespacesDescription,
    workloads,
    unmanaged: ctx.unmanagedOf?.(name) ?? [],
    noWriteAccess,
  });
  const o = plan.observation;
  if (o.invalidSpec) log.warn({ field: o.invalidSpec.field }, 'invalid spec: no workload changed');
  for (const u of o.unparsable) log.warn({ workload: u.workload, reasons: u.reasons }, 'workload args cannot be parsed: not rewritten');
  const written = new Map<Workload, Workload>();
  let conflict = false;
  for (const write of plan.writes) {
    try {
      written.set(write.workload, await writeTemplate(write, ctx, log));
    } catch (err) {
      const refusal = refusalOf(err);
      if (refusal === 'changed') conflict = true;
      else o.syncErrors.push(`${workloadRef(write.workload)}: ${String(err)}`);
      // Refused although access was granted when last asked: revoked since; ask again on the retry.
      if (refusal === 'forbidden') ctx.access?.forget(write.workload.obj.metadata?.namespace ?? '');
    }
  }
  // Reported once the workload's new version is in: its old one would read as rolled out at the old level.
  if (conflict) return { requeueAfterMs: CONFLICT_RETRY_MS };
  const reported = workloads.map((w) => written.get(w) ?? w);
  if (plan.reportsWorkloads) o.workloads = reported.map(progressOf);
  const generations = plan.reportsWorkloads && ctx.mode === 'standalone' ? reported.map(generationOf) : [];
  await applyStatus(cr, o, generations, ctx);
  if (o.syncErrors.length) throw new Error(`sync failed: ${o.syncErrors.join('; ')}`);
  // Nothing announces a RoleBinding (the operator does not watch RBAC): look again once a denial is forgotten.
  if (noWriteAccess.length) return { requeueAfterMs: DENIAL_REMEMBERED_MS + 1_000 };
}

async function deniedWrites(needs: ReturnType<typeof writeNeedsOf>, access: WriteAccess | undefined): Promise<DeniedWrites> {
  if (!access) return [];
  const out: DeniedWrites = [];
  for (const [namespace, need] of [...needs].sort(([a], [b]) => a.localeCompare(b))) {
    const denied = await access.denied(namespace, need);
    if (denied.length) out.push({ namespace, denied: denied.map(describeNeed) });
  }
  return out;
}

/** The rewritten template, written with the resourceVersion of the version the plan was made on (a 409 if it moved). */
async function writeTemplate(write: TemplateWrite, ctx: DriverContext, log: Logger): Promise<Workload> {
  const { kind, obj } = write.workload;
  const path = `/apis/apps/v1/namespaces/${obj.metadata?.namespace}/${kind === 'Deployment' ? 'deployments' : 'daemonsets'}/${obj.metadata?.name}`;
  const body = structuredClone(obj);
  if (body.spec) body.spec.template.spec = write.rewrite(body.spec.template.spec ?? { containers: [] });
  const updated = await ctx.http.request<V1Deployment | V1DaemonSet>('PUT', path, { body });
  ctx.metrics.workloadWrites.inc({ kind });
  log.info({ workload: workloadRef(write.workload) }, write.what);
  return { kind, obj: updated } as Workload;
}

/** Our conditions (and in standalone mode observedGeneration and generations) on the CR; the full report in its CSIHandoverReport. */
async function applyStatus(cr: ClusterCSIDriver, o: DriverObservation, generations: GenerationStatus[], ctx: DriverContext): Promise<void> {
  const current = cr.status ?? {};
  const ref = { name: cr.metadata.name, uid: cr.metadata.uid ?? '' };
  const report = ctx.handoverReport(cr.metadata.name);
  const conditions = driverConditions(o, report, current.conditions, kubeTime(ctx.now()));
  const parts: StatusPart[] = [
    { name: 'conditions', required: true, conditions: conditions.filter((c) => c.type !== HANDED_OVER) },
    { name: `condition ${HANDED_OVER}`, required: false, conditions: conditions.filter((c) => c.type === HANDED_OVER) },
  ];
  // What the CRD's owner would write: only where nobody else owns the driver (csi-operator does in companion mode).
  if (ctx.mode === 'standalone') {
    parts.push({ name: 'observedGeneration', required: false, fields: { observedGeneration: cr.metadata.generation ?? 0 } });
    if (generations.length) parts.push({ name: 'generations', required: false, fields: { generations } });
  }
  await ctx.statusWriter.driverStatus(ref, parts, (want) => statusUpToDate(want, current));
  if (report && ref.uid) {
    const status = handoverStatus(report);
    const stored = ctx.storedReport(cr.metadata.name);
    await ctx.statusWriter.report(ref, status, stored && { ...stored, upToDate: sameContent(status, stored.status) });
  }
}

/** Whether the CR's status already reads as `want` (our conditions ignoring transition times, our fields). */
export function statusUpToDate(want: Record<string, unknown>, current: NonNullable<ClusterCSIDriver['status']>): boolean {
  const conditions = (want.conditions ?? []) as Condition[];
  const generations = (want.generations ?? []) as GenerationStatus[];
  return (
    conditionsUpToDate(conditions, current.conditions) &&
    (want.observedGeneration === undefined || want.observedGeneration === current.observedGeneration) &&
    generations.every((g) =>
      current.generations?.some(
        (c) => c.group === g.group && c.resource === g.resource && c.namespace === g.namespace && c.name === g.name && c.lastGeneration === g.lastGeneration,
      ),
    )
  );
}
