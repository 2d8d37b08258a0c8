// The ClusterCSIDriver reconcile: level-based, one driver name per call. Reads the CR and the driver's
// labelled workloads from the informer caches, brings every klog verbosity flag to the level the CR asks
// for (standalone mode, Managed/Force only), and reports with conditions written by server-side apply.
import type { V1DaemonSet, V1Deployment, V1PodSpec } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ClusterCSIDriver, type Condition, GROUP, KIND, objectPath, validateSpec, VERSION, type GenerationStatus } from '../api/clustercsidriver.js';
import { isConflict, type KubeHttp } from '../kube/http.js';
import type { ReconcileResult } from '../kube/workqueue.js';
import { rewritePodSpecVerbosity } from '../loglevel/args.js';
import { verbosityFor } from '../loglevel/verbosity.js';
import type { Metrics } from '../metrics.js';
import { computeConditions, conditionsUpToDate, type DriverObservation, withTransitionTimes } from '../status/conditions.js';
import { daemonSetProgress, deploymentProgress, type WorkloadProgress } from '../status/workload-progress.js';

export const DRIVER_LABEL = 'csi-handover.io/driver';
export const FIELD_MANAGER = 'csi-handover';

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
  now(): Date;
}

const workloadPath = (w: { kind: Workload['kind']; namespace: string; name: string }): string =>
  `/apis/apps/v1/namespaces/${w.namespace}/${w.kind === 'Deployment' ? 'deployments' : 'daemonsets'}/${w.name}`;
const ref = (w: Workload): string => `${w.kind} ${w.obj.metadata?.namespace}/${w.obj.metadata?.name}`;
const progressOf = (w: Workload): WorkloadProgress => (w.kind === 'Deployment' ? deploymentProgress(w.obj) : daemonSetProgress(w.obj));

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
  if (!validation.ok) {
    log.warn({ field: validation.field, value: validation.value }, 'invalid spec: no workload changed');
    observation.invalidSpec = { field: validation.field, message: validation.message };
    await applyStatus(cr, observation, [], ctx);
    return;
  }
  const { managementState } = validation.spec;
  if (managementState === 'Removed') {
    // Nothing the operator adds to workloads yet; the driver's own settings stay as they are.
    await applyStatus(cr, observation, [], ctx);
    return;
  }
  const mayWrite = ctx.mode === 'standalone' && (managementState === 'Managed' || managementState === 'Force');
  const written: Workload[] = [];
  for (const w of workloads) {
    const plan = rewritePodSpecVerbosity(w.obj.spec?.template.spec ?? { containers: [] }, observation.targetVerbosity);
    if (plan.kind === 'malformed') {
      log.warn({ workload: ref(w), reasons: plan.reasons }, 'workload args cannot be parsed: not rewritten');
      observation.unparsable.push({ workload: ref(w), reasons: plan.reasons });
      written.push(w);
    } else if (plan.kind === 'changed' && mayWrite) {
      try {
        written.push(await writeVerbosity(w, observation.targetVerbosity, ctx, log));
      } catch (err) {
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
}

/** Read, rewrite, write with the resourceVersion just read; a conflict re-reads and decides again. */
async function writeVerbosity(w: Workload, target: number, ctx: DriverContext, log: Logger): Promise<Workload> {
  const path = workloadPath({ kind: w.kind, namespace: w.obj.metadata?.namespace ?? '', name: w.obj.metadata?.name ?? '' });
  for (let attempt = 1; ; attempt++) {
    const fresh = await ctx.http.get<V1Deployment | V1DaemonSet>(path);
    const spec: V1PodSpec = fresh.spec?.template.spec ?? { containers: [] };
    const plan = rewritePodSpecVerbosity(spec, target);
    if (plan.kind !== 'changed') return { kind: w.kind, obj: fresh } as Workload;
    const body = structuredClone(fresh);
    if (body.spec) body.spec.template.spec = plan.spec;
    try {
      const updated = await ctx.http.request<V1Deployment | V1DaemonSet>('PUT', path, { body });
      ctx.metrics.workloadWrites.inc({ kind: w.kind });
      log.info({ workload: `${w.kind} ${fresh.metadata?.namespace}/${fresh.metadata?.name}`, containers: plan.containers, verbosity: target }, 'set klog verbosity');
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
  const conditions: Condition[] = withTransitionTimes(computeConditions(o), current.conditions, ctx.now().toISOString().replace(/\.\d{3}Z$/, 'Z'));
  const standalone = ctx.mode === 'standalone';
  const observedGeneration = cr.metadata.generation ?? 0;
  const generationsUpToDate = generations.every((g) =>
    current.generations?.some((c) => c.group === g.group && c.resource === g.resource && c.namespace === g.namespace && c.name === g.name && c.lastGeneration === g.lastGeneration));
  if (conditionsUpToDate(conditions, current.conditions) && (!standalone || (current.observedGeneration === observedGeneration && generationsUpToDate))) return;
  const status: Record<string, unknown> = { conditions };
  if (standalone) {
    status.observedGeneration = observedGeneration;
    if (generations.length) status.generations = generations;
  }
  await ctx.http.apply(`${objectPath(cr.metadata.name)}/status`, { apiVersion: `${GROUP}/${VERSION}`, kind: KIND, metadata: { name: cr.metadata.name }, status }, FIELD_MANAGER);
  ctx.metrics.statusWrites.inc();
}
