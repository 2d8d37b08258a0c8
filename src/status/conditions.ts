// The operator's conditions on a ClusterCSIDriver, computed from what it observed and the handovers it measured.
// Names end in Available, Progressing and Degraded under one prefix, so OpenShift's suffix roll-up counts them.
import type { Condition } from '../api/clustercsidriver.js';
import { formatGap } from '../handover/measure.js';
import type { HandoverReport } from '../handover/report.js';
import { describeProgress, type WorkloadProgress } from './workload-progress.js';

export const CONDITION_PREFIX = 'CSIHandover';
export const AVAILABLE = `${CONDITION_PREFIX}Available`;
export const PROGRESSING = `${CONDITION_PREFIX}Progressing`;
export const DEGRADED = `${CONDITION_PREFIX}Degraded`;
export const HANDED_OVER = `${CONDITION_PREFIX}LeasesHandedOver`;
const NO_HANDOVER_YET = 'NoHandoverYet';

export interface DriverObservation {
  /** Set when the spec holds a value the operator cannot act on. */
  invalidSpec?: { field: string; message: string };
  managementState: 'Managed' | 'Unmanaged' | 'Force' | 'Removed';
  /** Label selector and namespaces searched, for the "no workloads" message. */
  selector: string;
  namespaces: string;
  workloads: WorkloadProgress[];
  /** Workloads whose args could not be parsed, with the reasons. */
  unparsable: { workload: string; reasons: string[] }[];
  /** Workloads whose verbosity differs from the target while the operator may not write (companion, Unmanaged). */
  notAtTarget: string[];
  /** Workloads not at the target because the operator has no write access to them (see noWriteAccess). */
  notWritable?: string[];
  targetVerbosity: number;
  /** Writes that failed in this reconcile (they are retried with backoff). */
  syncErrors: string[];
  /** Namespaces where the operator may not make writes it needs ("update leases"): a RoleBinding is missing. */
  noWriteAccess?: { namespace: string; denied: string[] }[];
  /** What the operator leaves alone in a workload it manages, and why (no verbosity flag, a selector it cannot follow). */
  notes?: string[];
}

/** What a namespace without csi-handover-driver's RoleBinding costs, and how to grant it. */
export function noWriteAccessMessage(missing: readonly { namespace: string; denied: string[] }[]): string {
  const where = missing.map((m) => `${m.denied.join(', ')} in namespace ${m.namespace}`).join('; ');
  const first = missing[0]?.namespace ?? '<namespace>';
  return (
    `csi-handover may not ${where}: its handovers there fall back to lease expiry and nothing is written. ` +
    `Grant it with a RoleBinding to ClusterRole csi-handover-driver, e.g. kubectl -n ${first} create rolebinding csi-handover-driver ` +
    '--clusterrole=csi-handover-driver --serviceaccount=<operator namespace>:csi-handover'
  );
}

type Draft = Omit<Condition, 'lastTransitionTime'>;

export function computeConditions(o: DriverObservation): Draft[] {
  if (o.invalidSpec) {
    return [
      { type: AVAILABLE, status: 'Unknown', reason: 'InvalidSpec', message: 'no workload was changed: the spec is invalid' },
      { type: PROGRESSING, status: 'False', reason: 'InvalidSpec', message: 'no rollout started: the spec is invalid' },
      { type: DEGRADED, status: 'True', reason: 'InvalidSpec', message: o.invalidSpec.message },
    ];
  }
  if (o.managementState === 'Removed') {
    return [
      { type: AVAILABLE, status: 'False', reason: 'Removed', message: 'managementState is Removed: csi-handover does not manage this driver' },
      { type: PROGRESSING, status: 'False', reason: 'Removed', message: 'not managed' },
      { type: DEGRADED, status: 'False', reason: 'Removed', message: 'not managed' },
    ];
  }
  if (o.workloads.length === 0) {
    const message = [`no Deployment or DaemonSet labelled ${o.selector} in ${o.namespaces}`, ...(o.notes ?? [])].join('; ');
    return [
      { type: AVAILABLE, status: 'False', reason: 'NoWorkloadsFound', message },
      { type: PROGRESSING, status: 'False', reason: 'NoWorkloadsFound', message },
      { type: DEGRADED, status: 'False', reason: 'AsExpected', message: 'nothing to manage yet' },
    ];
  }
  const unavailable = o.workloads.filter((w) => !w.minimumAvailable);
  const rolling = o.workloads.filter((w) => !w.complete);
  const available: Draft = unavailable.length
    ? { type: AVAILABLE, status: 'False', reason: 'WorkloadsUnavailable', message: unavailable.map(describeProgress).join('; ') }
    : { type: AVAILABLE, status: 'True', reason: 'AsExpected', message: `${o.workloads.length} workload(s) available` };
  if (o.notes?.length) available.message = `${available.message}; ${o.notes.join('; ')}`;
  const progressing: Draft = rolling.length
    ? { type: PROGRESSING, status: 'True', reason: 'Deploying', message: rolling.map(describeProgress).join('; ') }
    : { type: PROGRESSING, status: 'False', reason: 'AsExpected', message: `all workloads at --v=${o.targetVerbosity} and rolled out` };
  if (!rolling.length && o.notAtTarget.length) {
    progressing.message = `not at --v=${o.targetVerbosity} (${o.managementState === 'Unmanaged' ? 'Unmanaged: not written' : 'left to the driver operator'}): ${o.notAtTarget.join(', ')}`;
  } else if (!rolling.length && o.notWritable?.length) {
    progressing.message = `not at --v=${o.targetVerbosity} (no write access, see ${DEGRADED}): ${o.notWritable.join(', ')}`;
  }
  const noAccess = o.noWriteAccess ?? [];
  const problems = [
    ...(noAccess.length ? [noWriteAccessMessage(noAccess)] : []),
    ...o.syncErrors,
    ...o.unparsable.map((u) => `${u.workload} not rewritten: ${u.reasons.join('; ')}`),
  ];
  const reason = noAccess.length ? 'NoWriteAccess' : o.syncErrors.length ? 'SyncError' : 'UnparsableArgs';
  const degraded: Draft = problems.length
    ? { type: DEGRADED, status: 'True', reason, message: problems.join('; ') }
    : { type: DEGRADED, status: 'False', reason: 'AsExpected', message: 'no problems' };
  return [available, progressing, degraded];
}

/** Stamps lastTransitionTime, keeping the previous one while a condition's status does not change. */
export function withTransitionTimes(drafts: Draft[], previous: readonly Condition[] | undefined | null, now: string): Condition[] {
  return drafts.map((d) => {
    const prev = previous?.find((p) => p.type === d.type);
    return { ...d, lastTransitionTime: prev && prev.status === d.status && prev.lastTransitionTime ? prev.lastTransitionTime : now };
  });
}

/** True when our conditions already read as computed (ignoring transition times): no status write needed. */
export function conditionsUpToDate(want: readonly Condition[], current: readonly Condition[] | undefined | null): boolean {
  return want.every((w) => {
    const c = current?.find((x) => x.type === w.type);
    return c !== undefined && c.status === w.status && c.reason === w.reason && c.message === w.message;
  });
}

/** The last handover of each lease, the largest gap, who released; the CR's current condition when we know no more. */
export function handoverCondition(report: HandoverReport | undefined, current: readonly Condition[] | undefined | null): Omit<Condition, 'lastTransitionTime'> {
  if (!report || report.leases.length === 0) {
    const kept = current?.find((c) => c.type === HANDED_OVER && c.reason !== NO_HANDOVER_YET);
    if (kept) return { type: kept.type, status: kept.status, reason: kept.reason, message: kept.message };
    return { type: HANDED_OVER, status: 'Unknown', reason: NO_HANDOVER_YET, message: 'no lease handover observed yet' };
  }
  const byWho = (who: string) => report.leases.filter((h) => h.releasedBy === who).length;
  const largest = [...report.leases].sort((a, b) => (b.gapMs ?? -1) - (a.gapMs ?? -1))[0];
  const largestText = largest?.gapMs === undefined ? 'no stop observed' : `${formatGap(largest.gapMs)} (${largest.namespace}/${largest.lease})`;
  const expired = byWho('expiry');
  const message = `last handover of ${report.leases.length} lease(s): largest gap ${largestText}; released by operator ${byWho('operator')}, by holder ${byWho('holder')}, expired ${expired}`;
  return expired
    ? { type: HANDED_OVER, status: 'False', reason: 'LeaseExpired', message }
    : { type: HANDED_OVER, status: 'True', reason: byWho('operator') ? 'ReleasedByOperator' : 'ReleasedByHolder', message };
}

/** The numbers users want at a glance, for a condition's message: how many leases the last handovers moved, the largest gap. */
export function lastHandoverSummary(report: HandoverReport | undefined): string | undefined {
  if (!report?.leases.length) return undefined;
  const gaps = report.leases.flatMap((h) => (h.gapMs === undefined ? [] : [h.gapMs]));
  const largest = gaps.length ? `largest gap ${formatGap(Math.max(...gaps))}` : 'no stop observed';
  return `last handover: ${report.leases.length} lease(s), ${largest}`;
}

/**
 * Every condition of ours on the CR, with transition times. Only conditions: OpenShift's ClusterCSIDriver schema
 * declares no field for the full report, which goes to the driver's CSIHandoverReport.
 */
export function driverConditions(
  o: DriverObservation,
  report: HandoverReport | undefined,
  current: readonly Condition[] | undefined | null,
  now: string,
): Condition[] {
  const drafts = [...computeConditions(o), handoverCondition(report, current)];
  const summary = lastHandoverSummary(report);
  const progressing = drafts.find((d) => d.type === PROGRESSING);
  if (summary && progressing?.status === 'False' && progressing.reason === 'AsExpected') progressing.message = `${progressing.message}; ${summary}`;
  return withTransitionTimes(drafts, current, now);
}
