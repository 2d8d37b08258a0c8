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
const MAX_REMEMBERED = 1_000;
const MAX_IN_FLIGHT = 8;

export class TokenReviewer {
  private readonly reviews = new Map<string, { until: number; status: Promise<TokenReviewStatus> }>();
  private inFlight = 0;

  constructor(
    private readonly http: KubeHttp,
    private readonly audience: string,
    private readonly now: () => number,
  ) {}

  review(token: string): Promise<TokenReviewStatus> {
    const key = createHash('sha256').update(token).digest('hex');
    const now = this.now();
    const known = this.reviews.get(key);
    if (known && known.until > now) return known.status;
    for (const [k, r] of this.reviews) if (r.until <= now || this.reviews.size >= MAX_REMEMBERED) this.reviews.delete(k);
    // Witnesses send a handful at a time; more at once is not them, and must not become a stream of API requests.
    if (this.inFlight >= MAX_IN_FLIGHT) return Promise.reject(new Error(`${MAX_IN_FLIGHT} token reviews already under way`));
    this.inFlight++;
    const status = this.ask(token).finally(() => this.inFlight--);
    // Until answered, concurrent reports share the request; a failed request (not an answer) is not remembered.
    this.reviews.set(key, { until: now + REMEMBER_MS, status });
    status.then(
      (s) => this.reviews.set(key, { until: this.now() + (s.authenticated === true ? REMEMBER_MS : REMEMBER_REFUSAL_MS), status }),
      () => this.reviews.delete(key),
    );
    return status;
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
