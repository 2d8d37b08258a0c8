// How far a Deployment or DaemonSet rollout has got, from its status, as Kubernetes itself judges it.
import type { V1DaemonSet, V1Deployment } from '@kubernetes/client-node';

export interface WorkloadProgress {
  kind: 'Deployment' | 'DaemonSet';
  namespace: string;
  name: string;
  desired: number;
  updated: number;
  available: number;
  /** pods of every revision, old ones included */
  total: number;
  /** the controller has seen the latest spec */
  observed: boolean;
  complete: boolean;
  /** enough pods available to serve, as the workload's own rollout limits define it (not every pod) */
  minimumAvailable: boolean;
}

export function deploymentProgress(d: V1Deployment): WorkloadProgress {
  const desired = d.spec?.replicas ?? 1;
  const s = d.status ?? {};
  const observed = (s.observedGeneration ?? 0) >= (d.metadata?.generation ?? 0);
  const updated = s.updatedReplicas ?? 0;
  const available = s.availableReplicas ?? 0;
  const total = s.replicas ?? 0;
  return {
    kind: 'Deployment',
    namespace: d.metadata?.namespace ?? '',
    name: d.metadata?.name ?? '',
    desired,
    updated,
    available,
    total,
    observed,
    complete: observed && updated === desired && total === desired && available === desired,
    // The Deployment controller's own judgement (MinimumReplicasAvailable), which honours maxUnavailable.
    minimumAvailable: desired === 0 || (s.conditions?.find((c) => c.type === 'Available')?.status === 'True' && available > 0),
  };
}

export function daemonSetProgress(ds: V1DaemonSet): WorkloadProgress {
  const s = ds.status;
  const desired = s?.desiredNumberScheduled ?? 0;
  const observed = (s?.observedGeneration ?? 0) >= (ds.metadata?.generation ?? 0);
  const updated = s?.updatedNumberScheduled ?? 0;
  const available = s?.numberAvailable ?? 0;
  return {
    kind: 'DaemonSet',
    namespace: ds.metadata?.namespace ?? '',
    name: ds.metadata?.name ?? '',
    desired,
    updated,
    available,
    total: s?.currentNumberScheduled ?? 0,
    observed,
    complete: observed && updated === desired && available === desired,
    minimumAvailable: desired === 0 || (available > 0 && desired - available <= maxUnavailableOf(ds, desired)),
  };
}

/** A DaemonSet's rolling-update maxUnavailable as a count (default 1; percentages round up, as Kubernetes does). */
function maxUnavailableOf(ds: V1DaemonSet, desired: number): number {
  const v = ds.spec?.updateStrategy?.rollingUpdate?.maxUnavailable ?? 1;
  if (typeof v === 'number') return v;
  const pct = /^(\d+)%$/.exec(v);
  return pct ? Math.ceil((desired * Number(pct[1])) / 100) : Number(v) || 1;
}

export const describeProgress = (p: WorkloadProgress): string =>
  `${p.kind} ${p.namespace}/${p.name}: ${p.updated}/${p.desired} updated, ${p.available}/${p.desired} available` +
  (p.total > p.desired ? `, ${p.total - p.desired} old pod(s) still running` : '') +
  (p.observed ? '' : ', new spec not yet observed');
