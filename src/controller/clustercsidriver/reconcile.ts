// The ClusterCSIDriver reconcile: level-based, one driver name per call. Reads the CR and the driver's labelled
// workloads from the informer caches and asks what it may write, plans (./plan.ts), rewrites the pod templates
// the plan names — each on the version the cache holds, so a conflict goes back to the queue — and reports with
// conditions written by server-side apply.
import type { V1DaemonSet, V1Deployment } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ClusterCSIDriver, GROUP, type GenerationStatus, KIND, objectPath, VERSION } from '../../api/clustercsidriver.js';
import { FIELD_MANAGER } from '../../api/names.js';
import { type Clock, kubeTime } from '../../clock.js';
import type { HandoverReport } from '../../handover/report.js';
import { DENIAL_REMEMBERED_MS, describeNeed, type WriteAccess } from '../../kube/access.js';
import { type KubeHttp } from '../../kube/http.js';
import { refusalOf } from '../../kube/errors.js';
import { sameContent } from '../../kube/same-content.js';
import type { ReconcileResult } from '../../kube/workqueue.js';
import type { Metrics } from '../../metrics.js';
import { driverConditions, conditionsUpToDate, type DriverObservation } from '../../status/conditions.js';
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

/** Server-side apply of our own status fields, only when they differ from what is there. */
async function applyStatus(cr: ClusterCSIDriver, o: DriverObservation, generations: GenerationStatus[], ctx: DriverContext): Promise<void> {
  const current = cr.status ?? {};
  const report = ctx.handoverReport(cr.metadata.name);
  const { conditions, handover } = driverConditions(o, report, current.conditions, kubeTime(ctx.now()));
  // Compared by content: the API server hands a custom resource back with its keys sorted, not in our order.
  const handoverUpToDate = sameContent(handover, (current as { handover?: unknown }).handover);
  const standalone = ctx.mode === 'standalone';
  const observedGeneration = cr.metadata.generation ?? 0;
  const generationsUpToDate = generations.every((g) =>
    current.generations?.some(
      (c) => c.group === g.group && c.resource === g.resource && c.namespace === g.namespace && c.name === g.name && c.lastGeneration === g.lastGeneration,
    ),
  );
  if (
    conditionsUpToDate(conditions, current.conditions) &&
    handoverUpToDate &&
    (!standalone || (current.observedGeneration === observedGeneration && generationsUpToDate))
  )
    return;
  const status: Record<string, unknown> = { conditions };
  if (handover) status.handover = handover;
  if (standalone) {
    status.observedGeneration = observedGeneration;
    if (generations.length) status.generations = generations;
  }
  await ctx.http.apply(
    `${objectPath(cr.metadata.name)}/status`,
    { apiVersion: `${GROUP}/${VERSION}`, kind: KIND, metadata: { name: cr.metadata.name }, status },
    FIELD_MANAGER,
  );
  ctx.metrics.statusWrites.inc();
  ctx.log.debug(
    {
      driver: cr.metadata.name,
      conditions: conditions.filter((c) => !conditionsUpToDate([c], current.conditions)).map((c) => c.type),
      handover: !handoverUpToDate,
    },
    'status applied',
  );
}
