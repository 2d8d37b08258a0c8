// The ClusterCSIDriver decision, as a plan: a pure function of the CR, its labelled workloads and the write access
// the operator has, that says which pod templates to rewrite and what the conditions should report. The reconcile
// (./reconcile.ts) gathers the inputs, carries out the writes and applies the status.
import type { V1DaemonSet, V1Deployment, V1PodSpec } from '@kubernetes/client-node';
import { type ClusterCSIDriver, type GenerationStatus, validateSpec } from '../../api/clustercsidriver.js';
import { DRIVER_LABEL } from '../../api/names.js';
import { specHasHandoverGate, withHandoverGate } from '../../handover/gate.js';
import { leaseNamespacesOf } from '../../handover/lease-namespaces.js';
import { DAEMONSET_UPDATE, DEPLOYMENT_UPDATE, describeNeed, LEASE_RELEASE, POD_PATCH, type WriteNeed } from '../../kube/access.js';
import { planVerbosity, rewritePodSpecVerbosity } from '../../loglevel/args.js';
import { verbosityFor } from '../../loglevel/verbosity.js';
import type { DriverObservation } from '../../status/conditions.js';

export type Mode = 'standalone' | 'companion';
export type Workload = { kind: 'Deployment'; obj: V1Deployment } | { kind: 'DaemonSet'; obj: V1DaemonSet };
export type DeniedWrites = { namespace: string; denied: string[] }[];

export const workloadRef = (w: Workload): string => `${w.kind} ${w.obj.metadata?.namespace}/${w.obj.metadata?.name}`;

/** A pod template to rewrite: `rewrite` is applied to the template as written, and returns it unchanged when it is done. */
export interface TemplateWrite {
  workload: Workload;
  rewrite: (spec: V1PodSpec) => V1PodSpec;
  what: string;
}

export interface DriverPlan {
  /** What the conditions report; its workloads' progress is added once the writes are done. */
  observation: DriverObservation;
  writes: TemplateWrite[];
  /** Whether the workloads' rollout is reported (their progress, and their generations in standalone mode). */
  reportsWorkloads: boolean;
}

export interface DriverInput {
  cr: ClusterCSIDriver;
  mode: Mode;
  namespacesDescription: string;
  workloads: Workload[];
  /** Labelled objects of kinds the operator does not manage (StatefulSets), as "Kind namespace/name". */
  unmanaged: string[];
  /** Namespaces where a write the driver needs is denied (see writeNeedsOf). */
  noWriteAccess: DeniedWrites;
}

/** Whether the operator writes --v into the driver's templates: standalone mode, Managed or Force. */
function writesTemplates(cr: ClusterCSIDriver, mode: Mode): boolean {
  const v = validateSpec(cr.spec);
  return mode === 'standalone' && v.ok && (v.spec.managementState === 'Managed' || v.spec.managementState === 'Force');
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

/** The write access to check before planning: none for an invalid or Removed driver (nothing is written for it). */
export function writeNeedsOf(cr: ClusterCSIDriver, mode: Mode, workloads: readonly Workload[]): Map<string, WriteNeed[]> {
  const v = validateSpec(cr.spec);
  if (!v.ok || v.spec.managementState === 'Removed') return new Map();
  return writeNeeds(workloads, writesTemplates(cr, mode));
}

/**
 * What the operator leaves alone in a workload it manages, said in the Available condition: a workload none of
 * whose containers has a klog verbosity flag (nothing to set: one is not added), and a Deployment whose selector
 * uses matchExpressions (its pods are not matched, so its rollouts are not coordinated: leases expire as usual).
 */
export function workloadNote(w: Workload): string | undefined {
  const spec = w.obj.spec?.template.spec ?? { containers: [] };
  if (planVerbosity(spec, 0).every((p) => p.result.kind === 'absent'))
    return `${workloadRef(w)} has no klog verbosity flag (--v/-v) in any container: its level is left as it is`;
  if (w.kind === 'Deployment' && w.obj.spec?.selector?.matchExpressions?.length)
    return `${workloadRef(w)} selects its pods with matchExpressions: its rollouts are not coordinated (lease handover needs a matchLabels selector)`;
  return undefined;
}

/**
 * The new verbosity. A handover gate an older csi-handover put into the template (new pods are gated at admission
 * now, only while a handover is pending) leaves with this write: it rolls the pods anyway.
 */
const setVerbosity =
  (target: number) =>
  (spec: V1PodSpec): V1PodSpec => {
    const plan = rewritePodSpecVerbosity(spec, target);
    return plan.kind === 'changed' ? withHandoverGate(plan.spec, false) : spec;
  };

export function planDriver(i: DriverInput): DriverPlan {
  const validation = validateSpec(i.cr.spec);
  const name = i.cr.metadata.name;
  const observation: DriverObservation = {
    managementState: validation.ok ? validation.spec.managementState : 'Managed',
    selector: `${DRIVER_LABEL}=${name}`,
    namespaces: i.namespacesDescription,
    workloads: [],
    unparsable: [],
    notAtTarget: [],
    targetVerbosity: validation.ok ? verbosityFor(validation.spec.logLevel) : 2,
    syncErrors: [],
  };
  const note = (n: string) => (observation.notes ??= []).push(n);
  for (const u of i.unmanaged) note(`${u} is labelled ${observation.selector}, but only Deployments and DaemonSets are managed: left alone`);
  const plan: DriverPlan = { observation, writes: [], reportsWorkloads: false };
  if (!validation.ok) {
    observation.invalidSpec = { field: validation.field, message: validation.message };
    return plan;
  }
  if (validation.spec.managementState === 'Removed') {
    // Undo what an older csi-handover added to templates — the handover gate — and nothing of the driver's own.
    // A gate nobody lifts would strand the next pods, so it goes now, even though that rolls the Deployment once.
    if (i.mode !== 'standalone') return plan;
    for (const w of i.workloads) {
      if (w.kind === 'Deployment' && specHasHandoverGate(w.obj.spec?.template.spec)) {
        plan.writes.push({ workload: w, rewrite: (spec) => withHandoverGate(spec, false), what: 'removed the handover scheduling gate' });
      }
    }
    return plan;
  }
  const mayWrite = writesTemplates(i.cr, i.mode);
  plan.reportsWorkloads = true;
  observation.noWriteAccess = i.noWriteAccess;
  const denied = (w: Workload) =>
    i.noWriteAccess.some(
      (d) => d.namespace === w.obj.metadata?.namespace && d.denied.includes(describeNeed(w.kind === 'Deployment' ? DEPLOYMENT_UPDATE : DAEMONSET_UPDATE)),
    );
  const target = observation.targetVerbosity;
  for (const w of i.workloads) {
    const n = workloadNote(w);
    if (n) note(n);
    const rewrite = rewritePodSpecVerbosity(w.obj.spec?.template.spec ?? { containers: [] }, target);
    if (rewrite.kind === 'malformed') {
      observation.unparsable.push({ workload: workloadRef(w), reasons: rewrite.reasons });
    } else if (rewrite.kind === 'changed' && mayWrite && denied(w)) {
      // Not tried: it could only be refused (the Degraded condition says how to grant it).
      (observation.notWritable ??= []).push(workloadRef(w));
    } else if (rewrite.kind === 'changed' && mayWrite) {
      plan.writes.push({ workload: w, rewrite: setVerbosity(target), what: `set klog verbosity --v=${target}` });
    } else if (rewrite.kind === 'changed') {
      observation.notAtTarget.push(workloadRef(w));
    }
  }
  return plan;
}

export function generationOf(w: Workload): GenerationStatus {
  return {
    group: 'apps',
    resource: w.kind === 'Deployment' ? 'deployments' : 'daemonsets',
    namespace: w.obj.metadata?.namespace ?? '',
    name: w.obj.metadata?.name ?? '',
    lastGeneration: w.obj.metadata?.generation ?? 0,
  };
}
