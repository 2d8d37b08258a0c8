// The operator's Prometheus metrics, on one registry served at /metrics.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { REFUSAL_REASONS } from './handover/plan.js';
import { DEATH_EVIDENCE } from './handover/proven-dead.js';
import { type RequestObserver, resourceOf } from './kube/http.js';

export function makeMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'csi_handover_' });
  const reconciles = new Counter({
    name: 'csi_handover_reconciles_total',
    help: 'Reconciles by controller and outcome',
    labelNames: ['controller', 'outcome'] as const,
    registers: [registry],
  });
  const reconcileErrors = new Counter({
    name: 'csi_handover_reconcile_errors_total',
    help: 'Reconciles that failed and were requeued with backoff',
    labelNames: ['controller'] as const,
    registers: [registry],
  });
  const reconcileDuration = new Histogram({
    name: 'csi_handover_reconcile_duration_seconds',
    help: 'Time per reconcile',
    labelNames: ['controller'] as const,
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
    registers: [registry],
  });
  const workloadWrites = new Counter({
    name: 'csi_handover_workload_writes_total',
    help: 'Deployment and DaemonSet updates made by the operator',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const statusWrites = new Counter({
    name: 'csi_handover_status_writes_total',
    help: 'Status applies that succeeded, by resource (clustercsidrivers: our conditions; csihandoverreports: the full report)',
    labelNames: ['resource'] as const,
    registers: [registry],
  });
  const statusWriteFailures = new Counter({
    name: 'csi_handover_status_write_failures_total',
    help: 'Status writes the API server refused or that failed, by resource and reason (schema, invalid, forbidden, not-found, bad-request, transient)',
    labelNames: ['resource', 'reason'] as const,
    registers: [registry],
  });
  const leader = new Gauge({ name: 'csi_handover_leader', help: '1 while this replica holds the operator lease', registers: [registry] });
  const leadershipLost = new Counter({
    name: 'csi_handover_leadership_lost_total',
    help: 'Times this replica lost the operator lease (its work stopped; it campaigned again in-process)',
    registers: [registry],
  });
  const queueDepth = new Gauge({
    name: 'csi_handover_workqueue_depth',
    help: 'Keys waiting in the work queue',
    labelNames: ['queue'] as const,
    registers: [registry],
  });
  const handoverGap = new Histogram({
    name: 'csi_handover_handover_gap_seconds',
    help: 'Time from the old leader being told to stop to a new holder acquiring the lease',
    labelNames: ['namespace', 'lease', 'released_by'] as const,
    buckets: [0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60, 120, 180, 300],
    registers: [registry],
  });
  const releases = new Counter({
    name: 'csi_handover_lease_releases_total',
    help: 'Lease handovers by who released the lease (holder, operator, or nobody: expiry)',
    labelNames: ['released_by'] as const,
    registers: [registry],
  });
  const releaseEvidence = new Counter({
    name: 'csi_handover_release_evidence_total',
    help: "The operator's releases by the proof of death they rested on (the kubelet's report, a finished deletion, the node witness)",
    labelNames: ['evidence'] as const,
    registers: [registry],
  });
  for (const evidence of DEATH_EVIDENCE) releaseEvidence.inc({ evidence }, 0);
  const refusedReleases = new Counter({
    name: 'csi_handover_refused_releases_total',
    help: 'Pending handovers the operator did not release, by reason (the holder was not proven dead)',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const releaseConflicts = new Counter({
    name: 'csi_handover_release_conflicts_total',
    help: 'Release writes refused with 409 because the lease changed meanwhile',
    registers: [registry],
  });
  const gatesLifted = new Counter({
    name: 'csi_handover_gates_lifted_total',
    help: 'Handover scheduling gates lifted, by reason',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const admissions = new Counter({
    name: 'csi_handover_admissions_total',
    help: 'Pod admission reviews answered, by decision (gated, or why not)',
    labelNames: ['decision'] as const,
    registers: [registry],
  });
  const admissionDuration = new Histogram({
    name: 'csi_handover_admission_duration_seconds',
    help: 'Time to answer a pod admission review',
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2],
    registers: [registry],
  });
  const witnessReports = new Counter({
    name: 'csi_handover_witness_reports_total',
    help: "The node witness's reports sent straight to this replica, by result (accepted, hello, unauthenticated, forbidden, invalid, unknown-pod, throttled, error)",
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const witnessEvidenceRejected = new Counter({
    name: 'csi_handover_witness_evidence_rejected_total',
    help: "The node witness's evidence not taken as proof of death, by source (condition, report) and reason (judgeEvidence): the kubelet's report decides instead",
    labelNames: ['source', 'reason'] as const,
    registers: [registry],
  });
  const witnessPolicyInForce = new Gauge({
    name: 'csi_handover_witness_policy_in_force',
    help: "1 while the witness's admission policy and binding are in force as shipped and its ServiceAccount may attest: only then is its condition on a pod taken as evidence",
    registers: [registry],
  });
  const certRotations = new Counter({
    name: 'csi_handover_webhook_cert_rotations_total',
    help: 'Webhook certificate steps written (bootstrap, rotate-ca, rotate-serving)',
    labelNames: ['step'] as const,
    registers: [registry],
  });
  const overlapLost = new Counter({
    name: 'csi_handover_overlap_lost_total',
    help: 'New pods started before the release whose sidecar then waited a retry period (the workload waits for releases again until relearned)',
    registers: [registry],
  });
  const apiRequests = new Counter({
    name: 'csi_handover_api_requests_total',
    help: 'Requests the operator made to the API server (watch streams as WATCH), by caller (leader-election: its own Lease; controllers: all its work), verb, resource and HTTP status (0: no response)',
    labelNames: ['caller', 'verb', 'resource', 'code'] as const,
    registers: [registry],
  });
  // Series the alerts (config/prometheus) watch start at zero: Prometheus' increase() cannot see a series' first
  // sample as an increase, so a counter born at 1 would hide the first fallback, refusal or gate timeout.
  for (const released_by of ['holder', 'operator', 'expiry']) releases.inc({ released_by }, 0);
  for (const reason of REFUSAL_REASONS) refusedReleases.inc({ reason }, 0);
  gatesLifted.inc({ reason: 'timeout' }, 0);
  for (const controller of ['clustercsidriver', 'handover', 'webhook']) reconcileErrors.inc({ controller }, 0);
  return {
    registry,
    overlapLost,
    admissions,
    admissionDuration,
    witnessReports,
    witnessEvidenceRejected,
    witnessPolicyInForce,
    certRotations,
    apiRequests,
    handoverGap,
    releases,
    releaseEvidence,
    refusedReleases,
    releaseConflicts,
    gatesLifted,
    reconciles,
    reconcileErrors,
    reconcileDuration,
    workloadWrites,
    statusWrites,
    statusWriteFailures,
    leader,
    leadershipLost,
    queueDepth,
  };
}
export type Metrics = ReturnType<typeof makeMetrics>;

/**
 * Counts a client's requests under `caller`: the operator's own leader election renews on a clock, whatever the
 * handovers, so it is told apart from the work (`controllers`) that handovers cause.
 */
export const countRequestsOf =
  (metrics: Metrics, caller: 'leader-election' | 'controllers'): RequestObserver =>
  (verb, path, status) =>
    metrics.apiRequests.inc({ caller, verb, resource: resourceOf(path), code: String(status) });
