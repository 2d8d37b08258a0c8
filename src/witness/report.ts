// The witness's report straight to the operator: the moment it has proven a leader's containers exited, it POSTs
// that to every ready operator replica (the webhook Service's endpoints: only the leader acts, every replica keeps
// it) besides writing its condition on the pod, which takes an API write and a watch event to reach the operator.
// Authenticated by a ServiceAccount token of the operator's own audience (useless against the API server), over
// TLS verified with the webhook's caBundle. Best effort: a report that does not arrive leaves the condition.
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import type { V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type WitnessReport, WITNESS_REPORT_PATH } from '../handover/witness-report.js';
import type { KubeHttp } from '../kube/http.js';
import { Informer } from '../kube/informer.js';

export interface OperatorChannelOptions {
  namespace: string;
  /** The webhook Service: its EndpointSlices name the replicas, its DNS name is the one their certificate carries. */
  service: string;
  /** The MutatingWebhookConfiguration whose caBundle signs the replicas' serving certificate. */
  webhookConfiguration: string;
  /** A projected ServiceAccount token for WITNESS_AUDIENCE, re-read on every send (the kubelet rotates it). */
  tokenFile: string;
  timeoutMs?: number;
}

interface EndpointSlice {
  metadata?: { name?: string; namespace?: string };
  ports?: { name?: string; port?: number }[];
  endpoints?: { addresses?: string[]; conditions?: { ready?: boolean } }[];
}

/** Ready replicas' addresses and the webhook port (the Service's one port; named `webhook` in config/webhook). */
export function replicaTargets(slices: readonly EndpointSlice[]): { host: string; port: number }[] {
  const out: { host: string; port: number }[] = [];
  for (const s of slices) {
    const port = (s.ports ?? []).find((p) => p.name === 'webhook')?.port ?? (s.ports?.length === 1 ? s.ports[0]?.port : undefined);
    if (port === undefined) continue;
    for (const e of s.endpoints ?? []) if (e.conditions?.ready !== false) for (const host of e.addresses ?? []) out.push({ host, port });
  }
  return out;
}

export type SendResult = 'accepted' | 'refused' | 'unreachable' | 'not-configured';

export class OperatorChannel {
  private readonly slices: Informer<EndpointSlice & { metadata?: { name?: string } }>;
  private readonly configuration: Informer<V1MutatingWebhookConfiguration>;
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 4 });
  private lastHello = 0;

  constructor(
    http: KubeHttp,
    private readonly opts: OperatorChannelOptions,
    private readonly log: Logger,
  ) {
    this.slices = new Informer(http, {
      path: `/apis/discovery.k8s.io/v1/namespaces/${opts.namespace}/endpointslices`,
      labelSelector: `kubernetes.io/service-name=${opts.service}`,
      log,
    });
    this.configuration = new Informer(http, {
      path: '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      fieldSelector: `metadata.name=${opts.webhookConfiguration}`,
      log,
    });
  }

  start(): void {
    this.slices.start();
    this.configuration.start();
  }

  stop(): void {
    this.slices.stop();
    this.configuration.stop();
    this.agent.destroy();
  }

  /** A leader's deletion began: have the replicas review this token now, not when the report is due (at most once a minute). */
  hello(now: number): void {
    if (now - this.lastHello < 60_000) return;
    this.lastHello = now;
    void this.send('').then((result) => {
      // Not configured yet (replicas or CA not listed): the next deletion says hello again.
      if (result === 'not-configured') this.lastHello = 0;
      this.log.debug({ result }, 'said hello to the operator');
    });
  }

  /** Sends the report to every ready replica; accepted if one did. */
  report(report: WitnessReport): Promise<SendResult> {
    return this.send(JSON.stringify(report));
  }

  private async send(body: string): Promise<SendResult> {
    const ca = Buffer.from(this.configuration.list()[0]?.webhooks?.[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8');
    const targets = replicaTargets(this.slices.list());
    let token;
    try {
      token = readFileSync(this.opts.tokenFile, 'utf8').trim();
    } catch {
      token = '';
    }
    if (!ca || !token || targets.length === 0) return 'not-configured';
    const codes = await Promise.all(targets.map((t) => this.post(t, ca, token, body)));
    if (codes.some((c) => c >= 200 && c < 300)) return 'accepted';
    return codes.some((c) => c > 0) ? 'refused' : 'unreachable';
  }

  /** The HTTP status, or 0 when there was none (unreachable, TLS refused, timed out). */
  private post(target: { host: string; port: number }, ca: string, token: string, body: string): Promise<number> {
    return new Promise((resolve) => {
      const req = request(
        {
          host: target.host,
          port: target.port,
          // The replicas' certificate names the Service, not the pod: verify it as the API server does.
          servername: `${this.opts.service}.${this.opts.namespace}.svc`,
          ca,
          agent: this.agent,
          method: 'POST',
          path: WITNESS_REPORT_PATH,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          timeout: this.opts.timeoutMs ?? 1_000,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c.slice(0, 512)));
          res.on('end', () => {
            if ((res.statusCode ?? 0) >= 300) this.log.warn({ replica: target.host, code: res.statusCode, answer: text }, 'the operator refused the report');
            resolve(res.statusCode ?? 0);
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', (err) => {
        this.log.warn({ replica: target.host, err: String(err) }, 'cannot reach an operator replica');
        resolve(0);
      });
      req.end(body);
    });
  }
}
