// The TokenReviewer's memory and its limits: one request shared by the same token, one review at a time per
// witness pod, and refusals that can never push out a witness's remembered review.
import { describe, expect, it } from 'vitest';
import { WITNESS_AUDIENCE } from '../../src/handover/witness-report.js';
import type { KubeHttp } from '../../src/kube/http.js';
import { ReviewBusy, TokenReviewer, type TokenReviewStatus } from '../../src/kube/token-review.js';

/** The API server, for the one request TokenReviewer makes: `genuine` tokens are authenticated; answers wait while `held`. */
function fakeApi(genuine: ReadonlySet<string>) {
  const api = {
    calls: [] as string[],
    held: false,
    failing: false,
    pending: [] as (() => void)[],
    inFlight: 0,
    maxInFlight: 0,
    request(_verb: string, _path: string, opts: { body: { spec: { token: string } } }): Promise<{ status: TokenReviewStatus }> {
      const token = opts.body.spec.token;
      api.calls.push(token);
      if (api.failing) return Promise.reject(new Error('connection refused'));
      const status: TokenReviewStatus = genuine.has(token)
        ? { authenticated: true, audiences: [WITNESS_AUDIENCE], user: { username: 'system:serviceaccount:w:w' } }
        : { authenticated: false, error: 'invalid bearer token' };
      api.inFlight++;
      api.maxInFlight = Math.max(api.maxInFlight, api.inFlight);
      const answer = () => {
        api.inFlight--;
        return { status };
      };
      if (!api.held) return Promise.resolve(answer());
      return new Promise((resolve) => api.pending.push(() => resolve(answer())));
    },
    releaseAll() {
      for (const release of api.pending.splice(0)) release();
    },
  };
  return api;
}

function setup(genuine: string[] = ['real']) {
  const api = fakeApi(new Set(genuine));
  const clock = { now: 1_000_000 };
  const reviewer = new TokenReviewer(api as unknown as KubeHttp, WITNESS_AUDIENCE, () => clock.now);
  return { api, clock, reviewer };
}

const settled = <T>(p: Promise<T>) =>
  p.then(
    (v) => ({ ok: true as const, v }),
    (err: unknown) => ({ ok: false as const, err }),
  );

describe('TokenReviewer', () => {
  it('shares one request among concurrent reviews of the same token, and remembers the answer', async () => {
    const { api, reviewer } = setup();
    api.held = true;
    const both = Promise.all([reviewer.review('real', 'w1'), reviewer.review('real', 'w1')]);
    api.releaseAll();
    expect((await both).map((s) => s.authenticated)).toEqual([true, true]);
    expect((await reviewer.review('real', 'w1')).authenticated).toBe(true);
    expect(api.calls).toEqual(['real']);
  });

  it('reviews one token at a time per source: another token of it meanwhile is refused, other sources go on', async () => {
    const { api, reviewer } = setup(['real', 'other-witness']);
    api.held = true;
    const first = settled(reviewer.review('junk-0', 'w1'));
    const more = Array.from({ length: 100 }, (_, i) => settled(reviewer.review(`junk-${i + 1}`, 'w1')));
    const otherSource = settled(reviewer.review('other-witness', 'w2'));
    expect(api.calls).toEqual(['junk-0', 'other-witness']);
    for (const r of await Promise.all(more)) expect(r.ok ? 'answered' : r.err).toBeInstanceOf(ReviewBusy);
    api.releaseAll();
    expect(await first).toMatchObject({ ok: true, v: { authenticated: false } });
    expect(await otherSource).toMatchObject({ ok: true, v: { authenticated: true } });
    // Once answered, the source may be reviewed again.
    api.held = false;
    expect((await reviewer.review('real', 'w1')).authenticated).toBe(true);
    expect(api.maxInFlight).toBe(2);
  });

  it("keeps a witness's review through 2,000 refused tokens, of its own source and others", async () => {
    const { api, reviewer } = setup();
    await reviewer.review('real', 'w1');
    for (let i = 0; i < 2_000; i++) await reviewer.review(`junk-${i}`, i % 2 === 0 ? 'w1' : `w${i}`);
    expect(api.calls).toHaveLength(2_001);
    expect((await reviewer.review('real', 'w1')).authenticated).toBe(true);
    expect(api.calls).toHaveLength(2_001);
  });

  it('remembers the latest two tokens of a source, each for 5 minutes', async () => {
    const { api, clock, reviewer } = setup(['t1', 't2', 't3']);
    for (const t of ['t1', 't2', 't3', 't2', 't3']) await reviewer.review(t, 'w1');
    expect(api.calls).toEqual(['t1', 't2', 't3']);
    await reviewer.review('t1', 'w1');
    expect(api.calls).toEqual(['t1', 't2', 't3', 't1']);
    clock.now += 5 * 60_000;
    await reviewer.review('t1', 'w1');
    expect(api.calls).toHaveLength(5);
  });

  it('remembers at most 1,000 refusals, forgetting the oldest first', async () => {
    const { api, reviewer } = setup();
    for (let i = 0; i <= 1_000; i++) await reviewer.review(`junk-${i}`, 'w1');
    await reviewer.review('junk-1000', 'w1');
    await reviewer.review('junk-1', 'w1');
    expect(api.calls).toHaveLength(1_001);
    await reviewer.review('junk-0', 'w1');
    expect(api.calls).toHaveLength(1_002);
  });

  it('remembers a refusal for 10 s, and a failed request not at all', async () => {
    const { api, clock, reviewer } = setup();
    await reviewer.review('junk', 'w1');
    await reviewer.review('junk', 'w1');
    expect(api.calls).toHaveLength(1);
    clock.now += 10_000;
    await reviewer.review('junk', 'w1');
    expect(api.calls).toHaveLength(2);
    api.failing = true;
    await expect(reviewer.review('real', 'w1')).rejects.toThrow('connection refused');
    api.failing = false;
    expect((await reviewer.review('real', 'w1')).authenticated).toBe(true);
    expect(api.calls).toEqual(['junk', 'junk', 'real', 'real']);
  });
});
