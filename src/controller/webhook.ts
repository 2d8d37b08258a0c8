// The admission webhook's upkeep. Every replica loads the serving pair from the certificate Secret (and again
// on every change: rotation). The leader keeps the MutatingWebhookConfiguration narrow — only the namespaces of
// managed controller workloads whose new pods could be held back (not where a live witness runs on every
// holder's node) — and, when the operator issues its own certificates, rotates them step by step
// (src/webhook/certs.ts) and keeps the configuration's caBundle equal to the Secret's CA bundle.
import type { V1Deployment, V1MutatingWebhookConfiguration, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { FIELD_MANAGER } from '../api/names.js';
import type { Clock } from '../clock.js';
import { type KubeHttp } from '../kube/http.js';
import { isConflict, isNotFound } from '../kube/errors.js';
import type { InformerView } from '../kube/informer.js';
import { sameContent } from '../kube/same-content.js';
import type { WorkQueue } from '../kube/workqueue.js';
import type { Metrics } from '../metrics.js';
import { CA_ROTATED_AT, type CertPolicy, planCerts, readCertSecret } from '../webhook/certs.js';
import type { WebhookServer } from '../webhook/server.js';
import type { Part } from './part.js';
import { controllerQueue } from './queue.js';

export type CertSource = 'self' | 'service-ca' | 'olm';

export interface WebhookDeps {
  http: KubeHttp;
  log: Logger;
  metrics: Metrics;
  server: WebhookServer;
  port: number;
  host: string;
  certSource: CertSource;
  namespace: string;
  secretName: string;
  configurationName: string;
  policy: CertPolicy;
  secret: InformerView<V1Secret>;
  /** The configuration whose selector (and caBundle, certSource self) the leader keeps; none under OLM, which owns it. */
  configuration: InformerView<V1MutatingWebhookConfiguration> | undefined;
  /** Managed controller Deployments: the webhook asks only about their namespaces. */
  deployments: InformerView<V1Deployment>;
  /**
   * Of those, the namespaces where a new pod could be held back (the handover engine's view); the others are left
   * out, so their pods' creation does not wait for a webhook call. Undefined: every managed workload's namespace.
   */
  admissionNamespaces?: () => string[];
  now: Clock;
}

const KEY = 'webhook' as const;
const HOUR_MS = 3_600_000;
const SCOPE_RECHECK_MS = 60_000;
const MWC_PATH = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';
const NAMESPACE_LABEL = 'kubernetes.io/metadata.name';

/** Only the namespaces of managed controller workloads; none at all while there is none (every namespace has the label). */
export function namespaceSelectorFor(namespaces: readonly string[]): { matchExpressions: { key: string; operator: string; values?: string[] }[] } {
  const values = [...new Set(namespaces)].filter(Boolean).sort();
  return { matchExpressions: [values.length ? { key: NAMESPACE_LABEL, operator: 'In', values } : { key: NAMESPACE_LABEL, operator: 'DoesNotExist' }] };
}

const decode = (b64: string | undefined): string => (b64 ? Buffer.from(b64, 'base64').toString('utf8') : '');

export class WebhookController implements Part {
  readonly name = 'webhook';
  readonly needsLeadership = true;
  private readonly queue: WorkQueue<typeof KEY>;
  private active = false;
  private missingConfigLogged = false;

  constructor(private readonly d: WebhookDeps) {
    this.queue = controllerQueue({
      controller: 'webhook',
      metrics: d.metrics,
      log: d.log,
      id: () => KEY,
      backoff: { baseMs: 500, maxMs: 30_000 },
      reconcile: () => this.reconcile(),
    });
    const onSecret = (s: V1Secret) => {
      this.load(s);
      this.enqueue();
    };
    d.secret
      .on('add', onSecret)
      .on('update', onSecret)
      .on('delete', () => this.enqueue());
    d.configuration
      ?.on('add', () => this.enqueue())
      .on('update', () => this.enqueue())
      .on('delete', () => this.enqueue());
    d.deployments.on('add', () => this.enqueue()).on('delete', () => this.enqueue());
  }

  /** Every replica: serve the Secret's pair as soon as there is one. */
  loadCurrent(): void {
    const s = this.d.secret.get(`${this.d.namespace}/${this.d.secretName}`);
    if (s) this.load(s);
  }

  private load(s: V1Secret): void {
    const state = readCertSecret(s.data, s.metadata?.annotations, this.d.now());
    if (!state.serving) {
      this.d.log.warn({ secret: `${this.d.namespace}/${this.d.secretName}` }, 'the webhook Secret holds no usable serving certificate yet');
      return;
    }
    this.d.server.setServingPair({ certPem: state.serving.chainPem, keyPem: state.serving.keyPem }, this.d.port, this.d.host);
  }

  start(): void {
    this.active = true;
    this.queue.start();
    this.enqueue();
  }

  async stop(): Promise<void> {
    this.active = false;
    await this.queue.shutDown();
  }

  /** What admissionNamespaces() reads changed (a lease holder, a witness, a node's readiness, a lost race). */
  scopeChanged(): void {
    this.enqueue();
  }

  /** Something the configuration follows changed: the Secret, the configuration, the managed workloads' namespaces. */
  private enqueue(): void {
    if (this.active) this.queue.add(KEY);
  }

  private async reconcile(): Promise<{ requeueAfterMs?: number } | void> {
    if (!this.d.configuration) return;
    const mwc = this.d.configuration.get(this.d.configurationName);
    if (!mwc) {
      // Shipped with the manifests; without it nothing calls us. Not recreated here (an uninstall deletes it).
      if (!this.missingConfigLogged)
        this.d.log.warn({ name: this.d.configurationName }, 'MutatingWebhookConfiguration not found: new pods are admitted without the handover gate');
      this.missingConfigLogged = true;
      return;
    }
    this.missingConfigLogged = false;
    const now = this.d.now();
    let caBundle: string | undefined;
    let nextCheckAt: number | undefined;
    if (this.d.certSource === 'self') {
      const secret = this.d.secret.get(`${this.d.namespace}/${this.d.secretName}`);
      const state = readCertSecret(secret?.data, secret?.metadata?.annotations, now);
      const current = state.cas[0]?.pem;
      const published = current !== undefined && (mwc.webhooks ?? []).every((w) => decode(w.clientConfig.caBundle).includes(current));
      const step = planCerts(state, this.d.policy, published, now);
      if (step.action !== 'none') {
        const { carryOut } = await import('../webhook/issue.js');
        await this.writeSecret(secret, carryOut(step, state, this.d.policy, now));
        this.d.metrics.certRotations.inc({ step: step.action });
        this.d.log.info({ step: step.action, reason: step.reason }, 'webhook certificates: rotation step written');
        return { requeueAfterMs: 200 }; // next: publish the bundle (the Secret's watch event usually comes first)
      }
      caBundle = Buffer.from(state.cas.map((c) => c.pem).join(''), 'utf8').toString('base64');
      nextCheckAt = step.nextCheckAt;
    }
    const namespaceSelector = namespaceSelectorFor(this.d.admissionNamespaces?.() ?? this.d.deployments.list().map((dep) => dep.metadata?.namespace ?? ''));
    const stale = (mwc.webhooks ?? []).filter(
      (w) => !sameContent(w.namespaceSelector, namespaceSelector) || (caBundle !== undefined && w.clientConfig.caBundle !== caBundle),
    );
    if (stale.length) {
      const webhooks = (mwc.webhooks ?? []).map((w) => ({
        name: w.name,
        namespaceSelector,
        ...(caBundle !== undefined ? { clientConfig: { caBundle } } : {}),
      }));
      try {
        // The resourceVersion makes this an update of what we saw, never a re-creation after an uninstall.
        await this.d.http.apply(
          `${MWC_PATH}/${this.d.configurationName}`,
          {
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'MutatingWebhookConfiguration',
            metadata: { name: this.d.configurationName, resourceVersion: mwc.metadata?.resourceVersion },
            webhooks,
          },
          FIELD_MANAGER,
        );
      } catch (err) {
        if (isConflict(err) || isNotFound(err)) return { requeueAfterMs: 200 };
        throw err;
      }
      this.d.log.info({ namespaces: namespaceSelector.matchExpressions[0]?.values ?? [], caBundle: caBundle !== undefined }, 'webhook configuration updated');
    }
    // Looked at again at the next rotation, and hourly in any case (a clock step, a Secret edited by hand); each
    // minute where the scope is narrowed (a lost race's back-off ends without an event).
    const recheckMs = this.d.admissionNamespaces ? SCOPE_RECHECK_MS : HOUR_MS;
    return { requeueAfterMs: Math.min(recheckMs, Math.max(1000, (nextCheckAt ?? now + HOUR_MS) - now)) };
  }

  private async writeSecret(existing: V1Secret | undefined, next: { data: Record<string, string>; caRotatedAt: number }): Promise<void> {
    const metadata = {
      ...existing?.metadata,
      name: this.d.secretName,
      namespace: this.d.namespace,
      annotations: { ...existing?.metadata?.annotations, [CA_ROTATED_AT]: String(next.caRotatedAt) },
    };
    const body = { apiVersion: 'v1', kind: 'Secret', type: 'kubernetes.io/tls', metadata, data: next.data };
    const base = `/api/v1/namespaces/${this.d.namespace}/secrets`;
    if (existing) await this.d.http.request('PUT', `${base}/${this.d.secretName}`, { body });
    else await this.d.http.request('POST', base, { body });
  }
}
