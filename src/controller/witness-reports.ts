// Receives the node witness's reports (POST /witness/v1/exited, src/handover/witness-report.ts) on every replica:
// refuses what it can without the API (the body, the token's unverified claims), then has the API server review
// the token, holds the sender to its own node and hands the evidence to the handover engine. A report refused here
// changes nothing; the witness's condition on the pod, or the kubelet's report, still comes.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { claimedWitness, reportEvidence, reportSender, WitnessReport } from '../handover/witness-report.js';
import type { WitnessEvidence } from '../handover/witness-evidence.js';
import type { InformerView } from '../kube/informer.js';
import { ReviewBusy, type TokenReviewer } from '../kube/token-review.js';
import type { Metrics } from '../metrics.js';
import { describeIssues } from '../issues.js';

export interface ReportAnswer {
  code: number;
  message: string;
}

export interface WitnessReportsDeps {
  reviewer: Pick<TokenReviewer, 'review'>;
  witnessNamespace: string;
  witnesses: Pick<InformerView<V1Pod>, 'list'>;
  nodes: Pick<InformerView<V1Node>, 'list'>;
  handover: {
    witnessReported(uid: string, evidence: WitnessEvidence, receivedAt: number): { accepted: true } | { accepted: false; reason: string };
  };
  now: Clock;
  log: Logger;
  metrics: Pick<Metrics, 'witnessReports'>;
}

const byCode = (code: 401 | 403) => (code === 401 ? 'unauthenticated' : 'forbidden');

export class WitnessReports {
  constructor(private readonly d: WitnessReportsDeps) {}

  /** `token`: the bearer token the request carried; `body`: its JSON text. Without a body, only the token is reviewed (the witness warming up). */
  async receive(token: string | undefined, body: string): Promise<ReportAnswer> {
    const answer = await this.decide(token, body, this.d.now());
    this.d.metrics.witnessReports.inc({ result: answer.result });
    if (answer.code >= 400) this.d.log.warn({ code: answer.code, reason: answer.message }, 'witness report refused');
    return answer;
  }

  private async decide(token: string | undefined, body: string, receivedAt: number): Promise<ReportAnswer & { result: string }> {
    if (!token) return { code: 401, message: 'no bearer token', result: 'unauthenticated' };
    // Whatever needs no API call comes first: a token that cannot be a Ready witness's, or a report its witness
    // could not send, costs no TokenReview.
    const claimed = claimedWitness(token, this.d.witnessNamespace, this.d.witnesses.list(), this.d.nodes.list(), receivedAt);
    if (!claimed.ok) return { code: claimed.code, message: claimed.reason, result: byCode(claimed.code) };
    let report: WitnessReport | undefined;
    if (body.trim() !== '') {
      try {
        const parsed = WitnessReport.safeParse(JSON.parse(body));
        if (!parsed.success) throw new Error(describeIssues(parsed.error));
        report = parsed.data;
      } catch (err) {
        return { code: 400, message: `unreadable report: ${String(err instanceof Error ? err.message : err)}`, result: 'invalid' };
      }
      if (report.node !== claimed.node) return { code: 403, message: `the witness on ${claimed.node} reported for node ${report.node}`, result: 'forbidden' };
    }
    let review;
    try {
      review = await this.d.reviewer.review(token, claimed.podUid);
    } catch (err) {
      if (err instanceof ReviewBusy) return { code: 429, message: `${claimed.witness}: ${err.message}`, result: 'throttled' };
      return { code: 503, message: `cannot review the token: ${String(err)}`, result: 'error' };
    }
    // The API server's answer decides, against the witness pods as they are now (the review took a while).
    const sender = reportSender(review, this.d.witnessNamespace, this.d.witnesses.list(), this.d.nodes.list());
    if (!sender.ok) return { code: sender.code, message: sender.reason, result: byCode(sender.code) };
    if (!report) return { code: 200, message: `${sender.witness} may report for node ${sender.node}`, result: 'hello' };
    const evidence = reportEvidence(report, sender.node);
    if (!evidence.ok) return { code: 403, message: evidence.reason, result: 'forbidden' };
    const taken = this.d.handover.witnessReported(report.uid, evidence.evidence, receivedAt);
    if (!taken.accepted) return { code: 409, message: taken.reason, result: 'unknown-pod' };
    this.d.log.info(
      { pod: `${report.namespace}/${report.name}`, witness: sender.witness, exitedBy: report.exitedBy },
      'the witness reported every container exited',
    );
    return { code: 202, message: 'accepted', result: 'accepted' };
  }
}
