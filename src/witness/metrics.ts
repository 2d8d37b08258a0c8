// The witness's own metrics: what it wrote, how long after it started watching a deletion, and what it watches.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export function makeWitnessMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'csi_handover_witness_' });
  const evidence = new Counter({
    name: 'csi_handover_witness_evidence_total',
    help: 'Evidence writes by result: written, or why the API server refused (gone, changed, forbidden, invalid) or error',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of ['written', 'gone', 'changed', 'forbidden', 'invalid', 'error']) evidence.inc({ result }, 0);
  const reports = new Counter({
    name: 'csi_handover_witness_reports_total',
    help: 'Reports sent straight to the operator, by result: accepted (by a replica), refused, unreachable, not-configured (no token, CA or replica)',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of ['accepted', 'refused', 'unreachable', 'not-configured']) reports.inc({ result }, 0);
  const latency = new Histogram({
    name: 'csi_handover_witness_deletion_to_exit_seconds',
    help: 'From the witness seeing a leader pod deleted to every container of it seen exited',
    buckets: [0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30],
    registers: [registry],
  });
  const watching = new Gauge({ name: 'csi_handover_witness_pods_watched', help: 'Leader pods being deleted on this node, watched', registers: [registry] });
  return { registry, evidence, reports, latency, watching };
}
export type WitnessMetrics = ReturnType<typeof makeWitnessMetrics>;
