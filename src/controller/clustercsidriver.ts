// The ClusterCSIDriver reconcile: level-based, one driver name per call. Reads the CR and the driver's
// labelled workloads from the informer caches, brings every klog verbosity flag to the level the CR asks
// for (standalone mode, Managed/Force only), and reports with conditions written by server-side apply.
import type { V1DaemonSet, V1Deployment, V1PodSpec } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ClusterCSIDriver, type Condition, GROUP, KIND, objectPath, validateSpec, VERSION, type GenerationStatus } from '../api/clustercsidriver.js';
import { DAEMONSET_UPDATE, DENIAL_REMEMBERED_MS, DEPLOYMENT_UPDATE, describeNeed, LEASE_RELEASE, POD_PATCH, type WriteAccess, type WriteNeed } from '../kube/access.js';
import { isConflict, isForbidden, type KubeHttp } from '../kube/http.js';
import { sameContent } from '../kube/same-content.js';
import type { ReconcileResult } from '../kube/workqueue.js';
import { DRIVER_LABEL, FIELD_MANAGER } from '../api/names.js';
import { type Clock, kubeTime } from '../clock.js';
import { specHasHandoverGate, withHandoverGate } from '../handover/gate.js';
import { leaseNamespacesOf } from '../handover/lease-namespaces.js';
import { handoverCondition, type HandoverReport, handoverStatus } from '../handover/report.js';
import { planVerbosity, rewritePodSpecVerbosity } from '../loglevel/args.js';
import { verbosityFor } from '../loglevel/verbosity.js';
import type { Metrics } from '../metrics.js';
import { computeConditions, conditionsUpToDate, type DriverObservation, withTransitionTimes } from '../status/conditions.js';
import { daemonSetProgress, deploymentProgress, type WorkloadProgress } from '../status/workload-progress.js';

export type Mode = 'standalone' | 'companion';
export type Workload = { kind: 'Deployment'; obj: V1Deployment } | { kind: 'DaemonSet'; obj: V1DaemonSet };

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

/**
 * The writes this driver's handovers and log level need, by namespace: lease releases where its sidecars elect,
 * pod patches where its controllers run, workload updates where it may set --v.
 */
export function writeNeeds(workloads: readonly Workload[], writesWorkloads: boolean): Map<string, WriteNeed[]> {
  const needs = new Map<string, WriteNeed[]>();
  const add = (namespace: string, need: WriteNeed) => {
    const list = needs.get(namespace) ?? [];
    if (!list.includes(need)) list.push(need);
    needs.set(namespace, list);
  };
  for (const w of workloads) {
    const ns = w.obj.metadata?.namespace ?? '';
    if (w.kind === 'Deployment') {
      add(ns, POD_PATCH);
      for (const leaseNs of leaseNamespacesOf(w.obj.spec?.template.spec, ns)) add(leaseNs, LEASE_RELEASE);
    }
    if (writesWorkloads) add(ns, w.kind === 'Deployment' ? DEPLOYMENT_UPDATE : DAEMONSET_UPDATE);
  }
  return needs;
}

async function deniedWrites(workloads: readonly Workload[], writesWorkloads: boolean, access: WriteAccess | undefined): Promise<{ namespace: string; denied: string[] }[]> {
  if (!access) return [];
  const out: { namespace: string; denied: string[] }[] = [];
  for (const [namespace, needs] of [...writeNeeds(workloads, writesWorkloads)].sort(([a], [b]) => a.localeCompare(b))) {
    const denied = await access.denied(namespace, needs);
    if (denied.length) out.push({ namespace, denied: denied.map(describeNeed) });
  }
  return out;
}

const workloadPath = (w: { kind: Workload['kind']; namespace: string; name: string }): string =>
  `/apis/apps/v1/namespaces/${w.namespace}/${w.kind === 'Deployment' ? 'deployments' : 'daemonsets'}/${w.name}`;
const ref = (w: Workload): string => `${w.kind} ${w.obj.metadata?.namespace}/${w.obj.metadata?.name}`;
const progressOf = (w: Workload): WorkloadProgress => (w.kind === 'Deployment' ? deploymentProgress(w.obj) : daemonSetProgress(w.obj));

/**
 * What the operator leaves alone in a workload it manages, said in the Available condition: a workload none of
 * whose containers has a klog verbosity flag (nothing to set: one is not added), and a Deployment whose selector
 * uses matchExpressions (its pods are not matched, so its rollouts are not coordinated: leases expire as usual).
 */
export function workloadNote(w: Workload): string | undefined {
  const spec = w.obj.spec?.template.spec ?? { containers: [] };
  if (planVerbosity(spec, 0).every((p) => p.result.kind === 'absent')) return `${ref(w)} has no klog verbosity flag (--v/-v) in any container: its level is left as it is`;
  if (w.kind === 'Deployment' && w.obj.spec?.selector?.matchExpressions?.length) return `${ref(w)} selects its pods with matchExpressions: its rollouts are not coordinated (lease handover needs a matchLabels selector)`;
  return undefined;
}

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
  const validation = validateSpec(cr.spec);
  const workloads = ctx.workloadsOf(name);
  const observation: DriverObservation = {
    managementState: validation.ok ? validation.spec.managementState : 'Managed',
    selector: `${DRIVER_LABEL}=${name}`,
    namespaces: ctx.namespacesDescription,
    workloads: [],
    unparsable: [],
    notAtTarget: [],
    targetVerbosity: validation.ok ? verbosityFor(validation.spec.logLevel) : 2,
    syncErrors: [],
  };
  for (const u of ctx.unmanagedOf?.(name) ?? []) {
    (observation.notes ??= []).push(`${u} is labelled ${observation.selector}, but only Deployments and DaemonSets are managed: left alone`);
  }
  if (!validation.ok) {
    log.warn({ field: validation.field, value: validation.value }, 'invalid spec: no workload changed');
    observation.invalidSpec = { field: validation.field, message: validation.message };
    await applyStatus(cr, observation, [], ctx);
    return;
  }
  const { managementState } = validation.spec;
  if (managementState === 'Removed') {
    // Undo what an older csi-handover added to templates — the handover gate — and nothing of the driver's own.
    // A gate nobody lifts would strand the next pods, so it goes now, even though that rolls the Deployment once.
    if (ctx.mode === 'standalone') {
      for (const w of workloads) {
        if (w.kind !== 'Deployment' || !specHasHandoverGate(w.obj.spec?.template.spec)) continue;
        try {
          await writeTemplate(w, ctx, log, (spec) => withHandoverGate(spec, false), 'removed the handover scheduling gate');
        } catch (err) {
          observation.syncErrors.push(`${ref(w)}: ${String(err)}`);
        }
      }
    }
    await applyStatus(cr, observation, [], ctx);
    if (observation.syncErrors.length) throw new Error(`sync failed: ${observation.syncErrors.join('; ')}`);
    return;
  }
  const mayWrite = ctx.mode === 'standalone' && (managementState === 'Managed' || managementState === 'Force');
  observation.noWriteAccess = await deniedWrites(workloads, mayWrite, ctx.access);
  if (observation.noWriteAccess.length) log.warn({ denied: observation.noWriteAccess }, 'no write access in the driver\'s namespaces: bind ClusterRole csi-handover-driver there');
  const denied = (w: Workload) => observation.noWriteAccess?.some((d) => d.namespace === w.obj.metadata?.namespace && d.denied.includes(describeNeed(w.kind === 'Deployment' ? DEPLOYMENT_UPDATE : DAEMONSET_UPDATE)));
  const written: Workload[] = [];
  for (const w of workloads) {
    const note = workloadNote(w);
    if (note) (observation.notes ??= []).push(note);
    const plan = rewritePodSpecVerbosity(w.obj.spec?.template.spec ?? { containers: [] }, observation.targetVerbosity);
    if (plan.kind === 'malformed') {
      log.warn({ workload: ref(w), reasons: plan.reasons }, 'workload args cannot be parsed: not rewritten');
      observation.unparsable.push({ workload: ref(w), reasons: plan.reasons });
      written.push(w);
    } else if (plan.kind === 'changed' && mayWrite && denied(w)) {
      // Not tried: it could only be refused (the Degraded condition says how to grant it).
      (observation.notWritable ??= []).push(ref(w));
      written.push(w);
    } else if (plan.kind === 'changed' && mayWrite) {
      try {
        written.push(await writeVerbosity(w, observation.targetVerbosity, ctx, log));
      } catch (err) {
        // Refused although access was granted when last asked: revoked since; ask again on the retry.
        if (isForbidden(err)) ctx.access?.forget(w.obj.metadata?.namespace ?? '');
        observation.syncErrors.push(`${ref(w)}: ${String(err)}`);
        written.push(w);
      }
    } else {
      if (plan.kind === 'changed') observation.notAtTarget.push(ref(w));
      written.push(w);
    }
  }
  observation.workloads = written.map(progressOf);
  const generations = ctx.mode === 'standalone' ? written.map(generationOf) : [];
  await applyStatus(cr, observation, generations, ctx);
  if (observation.syncErrors.length) throw new Error(`sync failed: ${observation.syncErrors.join('; ')}`);
  // Nothing announces a RoleBinding (the operator does not watch RBAC): look again once a denial is forgotten.
  if (observation.noWriteAccess.length) return { requeueAfterMs: DENIAL_REMEMBERED_MS + 1_000 };
}

/**
 * The new verbosity. A handover gate an older csi-handover put into the template (new pods are gated at
 * admission now, only while a handover is pending) leaves with this write: it rolls the pods anyway.
 */
function writeVerbosity(w: Workload, target: number, ctx: DriverContext, log: Logger): Promise<Workload> {
  return writeTemplate(w, ctx, log, (spec) => {
    const plan = rewritePodSpecVerbosity(spec, target);
    if (plan.kind !== 'changed') return spec;
    return withHandoverGate(plan.spec, false);
  }, `set klog verbosity --v=${target}`);
}

/** Read, rewrite the pod template, write with the resourceVersion just read; a conflict re-reads and decides again. */
async function writeTemplate(w: Workload, ctx: DriverContext, log: Logger, rewrite: (spec: V1PodSpec) => V1PodSpec, what: string): Promise<Workload> {
  const path = workloadPath({ kind: w.kind, namespace: w.obj.metadata?.namespace ?? '', name: w.obj.metadata?.name ?? '' });
  for (let attempt = 1; ; attempt++) {
    const fresh = await ctx.http.get<V1Deployment | V1DaemonSet>(path);
    const spec: V1PodSpec = fresh.spec?.template.spec ?? { containers: [] };
    const next = rewrite(spec);
    if (next === spec) return { kind: w.kind, obj: fresh } as Workload;
    const body = structuredClone(fresh);
    if (body.spec) body.spec.template.spec = next;
    try {
      const updated = await ctx.http.request<V1Deployment | V1DaemonSet>('PUT', path, { body });
      ctx.metrics.workloadWrites.inc({ kind: w.kind });
      log.info({ workload: `${w.kind} ${fresh.metadata?.namespace}/${fresh.metadata?.name}` }, what);
      return { kind: w.kind, obj: updated } as Workload;
    } catch (err) {
      if (!isConflict(err) || attempt >= 5) throw err;
      log.debug({ attempt }, 'workload changed meanwhile: re-reading');
    }
  }
}

function generationOf(w: Workload): GenerationStatus {
  return {
    group: 'apps',
    resource: w.kind === 'Deployment' ? 'deployments' : 'daemonsets',
    namespace: w.obj.metadata?.namespace ?? '',
    name: w.obj.metadata?.name ?? '',
    lastGeneration: w.obj.metadata?.generation ?? 0,
  };
}

/** Server-side apply of our own status fields, only when they differ from what is there. */
async function applyStatus(cr: ClusterCSIDriver, o: DriverObservation, generations: GenerationStatus[], ctx: DriverContext): Promise<void> {
  const current = cr.status ?? {};
  const report = ctx.handoverReport(cr.metadata.name);
  const conditions: Condition[] = withTransitionTimes([...computeConditions(o), handoverCondition(report, current.conditions)], current.conditions, kubeTime(ctx.now()));
  const handover = report ? handoverStatus(report) : undefined;
  // Compared by content: the API server hands a custom resource back with its keys sorted, not in our order.
  const handoverUpToDate = sameContent(handover, (current as { handover?: unknown }).handover);
  const standalone = ctx.mode === 'standalone';
  const observedGeneration = cr.metadata.generation ?? 0;
  const generationsUpToDate = generations.every((g) =>
    current.generations?.some((c) => c.group === g.group && c.resource === g.resource && c.namespace === g.namespace && c.name === g.name && c.lastGeneration === g.lastGeneration));
  if (conditionsUpToDate(conditions, current.conditions) && handoverUpToDate && (!standalone || (current.observedGeneration === observedGeneration && generationsUpToDate))) return;
  const status: Record<string, unknown> = { conditions };
  if (handover) status.handover = handover;
  if (standalone) {
    status.observedGeneration = observedGeneration;
    if (generations.length) status.generations = generations;
  }
  await ctx.http.apply(`${objectPath(cr.metadata.name)}/status`, { apiVersion: `${GROUP}/${VERSION}`, kind: KIND, metadata: { name: cr.metadata.name }, status }, FIELD_MANAGER);
  ctx.metrics.statusWrites.inc();
  ctx.log.debug({
    driver: cr.metadata.name,
    conditions: conditions.filter((c) => !conditionsUpToDate([c], current.conditions)).map((c) => c.type),
    handover: !handoverUpToDate,
  }, 'status applied');
}
