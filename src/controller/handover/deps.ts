// What the handover controller is given, and the keys its queue carries.
import type { V1Deployment, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { HandoverReports } from '../../handover/report.js';
import type { WriteAccess } from '../../kube/access.js';
import type { EventRecorder } from '../../kube/events.js';
import type { KubeHttp } from '../../kube/http.js';
import type { InformerView } from '../../kube/informer.js';
import type { Metrics } from '../../metrics.js';

export interface HandoverDeps {
  http: KubeHttp;
  log: Logger;
  metrics: Metrics;
  events: EventRecorder;
  leases: InformerView<V1Lease>;
  pods: InformerView<V1Pod>;
  nodes: InformerView<V1Node>;
  /** Managed controller Deployments (labelled with the driver label). */
  deployments: () => V1Deployment[];
  gateTimeoutMs: number;
  /** Let new pods go before the release where the overlap model predicts it safe (otherwise it only learns). */
  earlyStart: boolean;
  /** Nodes where a node witness runs Ready: its evidence releases a leader there within ~0.1 s of its exit. */
  witnessedNodes: () => ReadonlySet<string>;
  /** Whether the witness's condition on a pod can have been written by the witness only (its admission policy in force). */
  witnessConditionTrust: () => { trusted: true } | { trusted: false; why: string };
  /** The clock skew allowed between a node, the API server and the operator when the witness's instant is bounded. */
  witnessClockSkewMs: number;
  reports: HandoverReports;
  /** A driver's handover report changed: its status needs an apply. */
  onReportChanged: (driver: string) => void;
  /** Something admissionNamespaces() reads changed: a lease's holder, a node's readiness, a lost race. */
  onAdmissionScopeChanged?: () => void;
  /** Whether the operator may patch pods where it would gate one (undefined: not asked). */
  access?: WriteAccess;
  now: Clock;
}

/** A lease to release, a workload whose pods to order and gate, a pod behind a gate no workload owns. */
export type HandoverKey = { kind: 'lease' | 'workload' | 'orphan-gate'; namespace: string; name: string };
export const keyId = (k: HandoverKey): string => `${k.kind}/${k.namespace}/${k.name}`;
export const keyIn = (kind: HandoverKey['kind'], o: { metadata?: { namespace?: string; name?: string } }): HandoverKey => ({
  kind,
  namespace: o.metadata?.namespace ?? '',
  name: o.metadata?.name ?? '',
});
