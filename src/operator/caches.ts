// Every cache the operator reads, started in every replica so a standby that takes over has warm state. Leases
// are small and written back whole on release: cached without their managedFields only. Pods and nodes are many
// and only read (or patched): cached as the fields decisions read (src/handover/cached.ts).
import type {
  KubernetesObject,
  V1DaemonSet,
  V1Deployment,
  V1Lease,
  V1MutatingWebhookConfiguration,
  V1Node,
  V1Pod,
  V1Secret,
  V1StatefulSet,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { COLLECTION_PATH } from '../api/clustercsidriver.js';
import { REPORT_COLLECTION_PATH } from '../api/handover-report.js';
import { DRIVER_LABEL } from '../api/names.js';
import type { Config } from '../config.js';
import { nodeForCache, podForCache } from '../handover/cached.js';
import { WITNESS_SELECTOR } from '../handover/witness-evidence.js';
import { type BindingObject, type PolicyObject, WITNESS_POLICY } from '../handover/witness-policy.js';
import type { KubeHttp } from '../kube/http.js';
import { Informer, type InformerOptions, type InformerView, unionOf, withoutManagedFields } from '../kube/informer.js';

type CacheOptions<T extends KubernetesObject> = Omit<InformerOptions<T>, 'path' | 'log'>;

export type Named = KubernetesObject & { metadata?: { generation?: number; labels?: Record<string, string> } };

export class Caches {
  readonly drivers: Informer<Named>;
  /** The drivers' CSIHandoverReports: where a report starts after a restart. Optional: without its CRD, handovers still work. */
  readonly reports: Informer<KubernetesObject>;
  readonly deployments: InformerView<V1Deployment>;
  readonly daemonSets: InformerView<V1DaemonSet>;
  /** Labelled StatefulSets are not managed; watched only to say so on their driver's CR. */
  readonly statefulSets: InformerView<V1StatefulSet>;
  readonly leases: InformerView<V1Lease>;
  readonly pods: InformerView<V1Pod>;
  readonly nodes: Informer<V1Node>;
  /** The node witness's pods (config/witness, a namespace of their own), if installed: where one is Ready, new pods need not wait for the release. */
  readonly witnesses: Informer<V1Pod>;
  /** The witness's admission policy and its binding: its condition on a pod counts only while they are in force. */
  readonly witnessPolicies: Informer<PolicyObject>;
  readonly witnessPolicyBindings: Informer<BindingObject>;
  readonly webhookSecret: Informer<V1Secret> | undefined;
  /** Under OLM the configuration is OLM's, generated from the CSV under a name of its own: not watched, not kept. */
  readonly webhookConfiguration: Informer<V1MutatingWebhookConfiguration> | undefined;
  /** The caches the operator cannot work without: readiness and leading wait for them. */
  private readonly required: Informer<KubernetesObject>[] = [];
  /** Caches that only add to a report: never waited for, so a role without them costs that note, not the operator. */
  private readonly optional: Informer<KubernetesObject>[] = [];

  constructor(http: KubeHttp, cfg: Config, log: Logger) {
    const scopes = cfg.namespaces.length ? cfg.namespaces.map((ns) => `/namespaces/${ns}`) : [''];
    const make = <T extends KubernetesObject>(path: string, opts: CacheOptions<T> = {}, needed = true): Informer<T> => {
      const i = new Informer<T>(http, { path, log, ...opts });
      (needed ? this.required : this.optional).push(i as unknown as Informer<KubernetesObject>);
      return i;
    };
    const perScope = <T extends KubernetesObject>(path: (scope: string) => string, opts: CacheOptions<T> = {}, needed = true) =>
      unionOf(scopes.map((scope) => make<T>(path(scope), opts, needed)));
    this.drivers = make<Named>(COLLECTION_PATH);
    this.reports = make<KubernetesObject>(REPORT_COLLECTION_PATH, { transform: withoutManagedFields }, false);
    this.deployments = perScope<V1Deployment>((s) => `/apis/apps/v1${s}/deployments`, { labelSelector: DRIVER_LABEL });
    this.daemonSets = perScope<V1DaemonSet>((s) => `/apis/apps/v1${s}/daemonsets`, { labelSelector: DRIVER_LABEL });
    this.statefulSets = perScope<V1StatefulSet>((s) => `/apis/apps/v1${s}/statefulsets`, { labelSelector: DRIVER_LABEL }, false);
    this.leases = perScope<V1Lease>((s) => `/apis/coordination.k8s.io/v1${s}/leases`, { transform: withoutManagedFields });
    this.pods = perScope<V1Pod>((s) => `/api/v1${s}/pods`, { transform: podForCache });
    this.nodes = make<V1Node>('/api/v1/nodes', { transform: nodeForCache });
    const ns = cfg.leaderElectionNamespace;
    this.witnesses = make<V1Pod>(
      `/api/v1/namespaces/${cfg.witnessNamespace}/pods`,
      { labelSelector: WITNESS_SELECTOR, transform: withoutManagedFields },
      false,
    );
    const byName = { fieldSelector: `metadata.name=${WITNESS_POLICY}`, transform: withoutManagedFields };
    this.witnessPolicies = make<PolicyObject>('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', byName, false);
    this.witnessPolicyBindings = make<BindingObject>('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', byName, false);
    this.webhookSecret =
      cfg.webhookPort > 0 ? make<V1Secret>(`/api/v1/namespaces/${ns}/secrets`, { fieldSelector: `metadata.name=${cfg.webhookSecret}` }) : undefined;
    this.webhookConfiguration =
      cfg.webhookPort > 0 && cfg.webhookCertSource !== 'olm'
        ? make<V1MutatingWebhookConfiguration>('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
            fieldSelector: `metadata.name=${cfg.webhookConfiguration}`,
            transform: withoutManagedFields,
          })
        : undefined;
  }

  start(): void {
    for (const i of [...this.required, ...this.optional]) i.start();
  }

  stop(): void {
    for (const i of [...this.required, ...this.optional]) i.stop();
  }

  synced(): boolean {
    return this.required.every((i) => i.hasSynced());
  }

  async waitForSync(): Promise<void> {
    await Promise.all(this.required.map((i) => i.waitForSync()));
  }
}
