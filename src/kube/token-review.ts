// TokenReview with a short memory: a witness sends a few reports a rollout with the same token, and the review
// (an API request, 10–50 ms on a loaded control plane) would otherwise sit in every one's path. What is remembered
// is only the API server's answer about the token; who may act on it is decided afresh on every report.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { KubeHttp } from './http.js';

/** The parts of a TokenReview's status the decision reads. */
export const TokenReviewStatus = z.object({
  authenticated: z.boolean().optional(),
  error: z.string().optional(),
  audiences: z.array(z.string()).optional(),
  user: z
    .object({
      username: z.string().optional(),
      extra: z.record(z.string(), z.array(z.string())).optional(),
    })
    .optional(),
});
export type TokenReviewStatus = z.infer<typeof TokenReviewStatus>;

/** A pod-bound token stays valid until its pod is deleted or it expires (an hour or more); the sender's pod is checked on every report. */
const REMEMBER_MS = 5 * 60_000;
/** A refusal is remembered briefly, so a sender retrying a bad token does not become a stream of reviews. */
const REMEMBER_REFUSAL_MS = 10_000;
/** The kubelet renews a witness's token at 80 % of its life (hourly): the current token and the one before. */
const TOKENS_PER_SOURCE = 2;
/** Only the API server's yes lands there, so this bounds the witness pods seen within REMEMBER_MS, not what anyone sends. */
const MAX_SOURCES = 5_000;
/** Anyone can cause a refusal: they have their own bound, so none pushes out a witness's review. */
const MAX_REFUSALS = 1_000;

/** Another token of the same source is under review: the caller answers 429. */
export class ReviewBusy extends Error {}

interface Remembered {
  key: string;
  until: number;
  status: TokenReviewStatus;
}

/**
 * Reviews are asked per source: the witness pod a token claims to be bound to (claimedWitness), which the caller
 * has already held to a Ready witness pod, so sources are as many as the witness pods.
 */
export class TokenReviewer {
  /** By source, oldest source first; at most TOKENS_PER_SOURCE each. */
  private readonly authenticated = new Map<string, Remembered[]>();
  /** By token hash, oldest first. */
  private readonly refused = new Map<string, Remembered>();
  private readonly inFlight = new Map<string, { key: string; status: Promise<TokenReviewStatus> }>();

  constructor(
    private readonly http: KubeHttp,
    private readonly audience: string,
    private readonly now: () => number,
  ) {}

  review(token: string, source: string): Promise<TokenReviewStatus> {
    const key = createHash('sha256').update(token).digest('hex');
    const now = this.now();
    const known = this.authenticated.get(source)?.find((r) => r.key === key) ?? this.refused.get(key);
    if (known && known.until > now) return Promise.resolve(known.status);
    const current = this.inFlight.get(source);
    // Concurrent reports with the same token share the request.
    if (current?.key === key) return current.status;
    // One review at a time per source, and no global cap: junk naming one witness pod then blocks only that pod's
    // new tokens (its remembered one still answers), never another witness's. Refused, not queued: a queue would
    // hold a connection per junk token and put the witness's own token behind all of them, past its 1 s timeout;
    // a real witness sends one token at a time and says hello before it reports, so it rarely meets this.
    if (current) return Promise.reject(new ReviewBusy('another token of the same witness pod is under review'));
    const status = this.ask(token);
    this.inFlight.set(source, { key, status });
    // A failed request (not an answer) is not remembered.
    const settle = (s?: TokenReviewStatus) => {
      this.inFlight.delete(source);
      if (s) this.remember(source, key, s);
    };
    status.then(settle, () => settle());
    return status;
  }

  /** Every insertion drops what has expired and keeps both maps within their bounds: no input makes them grow further. */
  private remember(source: string, key: string, status: TokenReviewStatus): void {
    const now = this.now();
    if (status.authenticated === true) {
      const kept = (this.authenticated.get(source) ?? []).filter((r) => r.key !== key);
      this.authenticated.delete(source);
      this.authenticated.set(source, [...kept.slice(Math.max(0, kept.length - TOKENS_PER_SOURCE + 1)), { key, until: now + REMEMBER_MS, status }]);
      this.refused.delete(key);
      for (const [s, rs] of this.authenticated) {
        const live = rs.filter((r) => r.until > now);
        if (live.length === 0) this.authenticated.delete(s);
        else if (live.length < rs.length) this.authenticated.set(s, live);
      }
      for (const s of this.authenticated.keys()) {
        if (this.authenticated.size <= MAX_SOURCES) break;
        this.authenticated.delete(s);
      }
      return;
    }
    this.refused.delete(key);
    this.refused.set(key, { key, until: now + REMEMBER_REFUSAL_MS, status });
    // Oldest first, and all remembered for as long: the expired ones are at the front.
    for (const [k, r] of this.refused) {
      if (r.until > now && this.refused.size <= MAX_REFUSALS) break;
      this.refused.delete(k);
    }
  }
  private async ask(token: string): Promise<TokenReviewStatus> {
    const body = { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: [this.audience] } };
    const answer = await this.http.request<{ status?: unknown }>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      body,
      signal: AbortSignal.timeout(5_000),
    });
    const parsed = TokenReviewStatus.safeParse(answer?.status ?? {});
    return parsed.success ? parsed.data : { authenticated: false, error: `unreadable TokenReview status: ${parsed.error.message}` };
  }
}
