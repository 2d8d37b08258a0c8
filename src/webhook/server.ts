// The mutating admission webhook's HTTPS endpoint (POST /mutate-v1-pod), and the node witness's (POST
// /witness/v1/exited, src/controller/witness-reports.ts). Every replica serves both from its own warm caches. It never refuses a pod: a review it cannot read, a decision that fails or takes too long is
// answered "allowed, unchanged" — the API server's failurePolicy: Ignore covers the operator being away.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { AdmissionPlan } from '../handover/plan.js';
import type { Metrics } from '../metrics.js';
import { WITNESS_REPORT_PATH } from '../handover/witness-report.js';
import { AdmissionReview, allowed, podOf } from './admission.js';
import { describeIssues } from '../issues.js';

export const MUTATE_PATH = '/mutate-v1-pod';
const MAX_BODY = 3 * 1024 * 1024; // the API server's own limit on an object is about this
const MAX_REPORT_BODY = 16 * 1024;
/** Well inside the webhook's timeoutSeconds, so the answer comes from us, not from the API server giving up. */
export const DECISION_BUDGET_MS = 1500;

export interface ServingPair {
  certPem: string;
  keyPem: string;
}

export interface WebhookServerDeps {
  log: Logger;
  metrics: Metrics;
  /** Whether the pod waits behind the gate (the handover engine's decision, on fresh holders). */
  decide: (pod: V1Pod, signal: AbortSignal) => Promise<AdmissionPlan>;
  /** Gating switched off by configuration: every pod is admitted unchanged. */
  gating: boolean;
  /** The node witness's reports (WITNESS_REPORT_PATH): the bearer token and the body, answered with a code. */
  witnessReport?: (token: string | undefined, body: string) => Promise<{ code: number; message: string }>;
}

export class WebhookServer {
  private server?: Server;
  private pair?: ServingPair;
  private closing = false;

  constructor(private readonly d: WebhookServerDeps) {}

  /** Serving, with a certificate loaded. */
  get ready(): boolean {
    return this.server?.listening === true && this.pair !== undefined;
  }

  /** Starts serving with the first pair; later pairs replace it for new connections (rotation). */
  setServingPair(pair: ServingPair, port: number, host: string): void {
    if (this.pair?.certPem === pair.certPem && this.pair.keyPem === pair.keyPem) return;
    this.pair = pair;
    if (this.server) {
      this.server.setSecureContext({ cert: pair.certPem, key: pair.keyPem });
      this.d.log.info('webhook serving certificate reloaded');
      return;
    }
    this.server = createServer({ cert: pair.certPem, key: pair.keyPem, minVersion: 'TLSv1.2' }, (req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 60_000;
    this.server.listen(port, host, () => this.d.log.info({ address: host, port, path: MUTATE_PATH }, 'serving the pod admission webhook'));
  }

  /**
   * Stops serving. The API server keeps its connection to a webhook open (keep-alive, 60 s here) and may still send
   * admissions on it while this replica shuts down, which kept close() waiting until the kubelet's SIGKILL: idle
   * connections are closed now, a response under way closes its connection, and whatever is still open after 2 s
   * is cut (the API server then fails open: failurePolicy Ignore).
   */
  close(): Promise<void> {
    const server = this.server;
    if (!server) return Promise.resolve();
    this.closing = true;
    return new Promise((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 2_000).unref();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0];
    if (req.method === 'POST' && path === WITNESS_REPORT_PATH && this.d.witnessReport) return this.witnessReport(req, res, this.d.witnessReport);
    if (req.method !== 'POST' || path !== MUTATE_PATH) {
      res.writeHead(404).end('not found');
      return;
    }
    const end = this.d.metrics.admissionDuration.startTimer();
    let body: string;
    try {
      body = await readBody(req);
    } catch (err) {
      res.writeHead(413).end(String(err));
      return;
    }
    let review: AdmissionReview;
    try {
      const parsed = AdmissionReview.safeParse(JSON.parse(body));
      if (!parsed.success) throw new Error(describeIssues(parsed.error));
      review = parsed.data;
    } catch (err) {
      this.d.log.warn({ err: String(err) }, 'unreadable AdmissionReview: answered 400 (the API server admits the pod unchanged)');
      this.d.metrics.admissions.inc({ decision: 'unreadable' });
      res.writeHead(400).end('unreadable AdmissionReview');
      return;
    }
    const answer = await this.review(review);
    res.writeHead(200, { 'content-type': 'application/json', ...(this.closing ? { connection: 'close' } : {}) }).end(JSON.stringify(answer));
    end();
  }

  private async witnessReport(req: IncomingMessage, res: ServerResponse, receive: NonNullable<WebhookServerDeps['witnessReport']>): Promise<void> {
    const token = /^Bearer (\S+)$/i.exec(req.headers.authorization ?? '')?.[1];
    let answer;
    try {
      answer = await receive(token, await readBody(req, MAX_REPORT_BODY));
    } catch (err) {
      answer = { code: 400, message: String(err instanceof Error ? err.message : err) };
    }
    const headers = { 'content-type': 'text/plain', ...(this.closing ? { connection: 'close' } : {}) };
    res.writeHead(answer.code, headers).end(answer.message);
  }

  private async review(review: AdmissionReview): Promise<unknown> {
    const { uid, kind, operation } = review.request;
    if (kind.kind !== 'Pod' || kind.group !== '' || operation !== 'CREATE' || !this.d.gating) {
      this.d.metrics.admissions.inc({ decision: this.d.gating ? 'not-a-pod-create' : 'gating-disabled' });
      return allowed(uid);
    }
    const pod = podOf(review);
    const who = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name || `${pod.metadata?.generateName ?? ''}*`}`;
    try {
      const plan = await this.d.decide(pod, AbortSignal.timeout(DECISION_BUDGET_MS));
      this.d.metrics.admissions.inc({ decision: plan.gate ? 'gated' : plan.reason });
      if (!plan.gate) {
        if (plan.reason === 'overlap')
          this.d.log.info({ pod: who, dryRun: review.request.dryRun === true, message: plan.message }, 'admitting a new pod ungated while its old leader dies');
        return allowed(uid, plan.reason === 'overlap' ? plan.patch : undefined);
      }
      const earlyInMs = plan.earlyAt === undefined ? undefined : Math.round(plan.earlyAt - Date.now());
      this.d.log.info(
        { pod: who, dryRun: review.request.dryRun === true, waitingFor: plan.message, earlyInMs },
        'admitting a new pod behind the handover gate',
      );
      return allowed(uid, plan.patch);
    } catch (err) {
      this.d.metrics.admissions.inc({ decision: 'error' });
      this.d.log.warn({ pod: who, err: String(err) }, 'admission decision failed: pod admitted ungated');
      return allowed(uid);
    }
  }
}

function readBody(req: IncomingMessage, max = MAX_BODY): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > max) {
        reject(new Error('request body too large'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
