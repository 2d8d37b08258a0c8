// The report endpoint as a whole (WitnessReports over a real TokenReviewer, the API server faked): what is refused
// before any TokenReview, what the review still decides, and that junk cannot crowd out a real witness.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { WitnessReports } from '../../src/controller/witness-reports.js';
import type { WitnessEvidence } from '../../src/handover/witness-evidence.js';
import { WITNESS_AUDIENCE } from '../../src/handover/witness-report.js';
import type { KubeHttp } from '../../src/kube/http.js';
import { TokenReviewer, type TokenReviewStatus } from '../../src/kube/token-review.js';
import type { Metrics } from '../../src/metrics.js';

const NS = 'csi-handover-witness';
const SA = 'csi-handover-witness';
const NOW = Date.parse('2026-12-03T21:00:00Z');
const ready = { conditions: [{ type: 'Ready', status: 'True' }] };
const node = (name: string): V1Node => ({ metadata: { name }, status: ready });
const witnessPod = (uid: string, nodeName: string, status = ready): V1Pod => ({
  metadata: { name: `witness-${nodeName}`, namespace: NS, uid },
  spec: { nodeName, serviceAccountName: SA, containers: [] },
  status,
});

interface Claims {
  aud?: string[];
  sub?: string;
  exp?: number;
  pod?: string;
  node?: string;
  nonce?: string;
}
/** A projected ServiceAccount token's shape, unsigned: only the fake API server's `signed` set makes one genuine. */
const token = (c: Claims = {}): string => {
  const claims = {
    aud: c.aud ?? [WITNESS_AUDIENCE],
    sub: c.sub ?? `system:serviceaccount:${NS}:${SA}`,
    exp: c.exp ?? NOW / 1000 + 3600,
    'kubernetes.io': {
      namespace: NS,
      serviceaccount: { name: SA, uid: 'sa-uid' },
      pod: { name: 'witness', uid: c.pod ?? 'w1' },
      node: { name: c.node ?? 'n1', uid: `${c.node ?? 'n1'}-uid` },
    },
    jti: c.nonce ?? 'real',
  };
  return `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;
};

/** The API server answering TokenReviews from the token's claims, authenticated only for `signed` tokens; held answers wait. */
function fakeApi(signed: Set<string>) {
  const api = {
    calls: 0,
    held: false,
    pending: [] as (() => void)[],
    inFlight: 0,
    maxInFlight: 0,
    request(_verb: string, _path: string, opts: { body: { spec: { token: string } } }): Promise<{ status: TokenReviewStatus }> {
      const t = opts.body.spec.token;
      api.calls++;
      const claims = JSON.parse(Buffer.from(t.split('.')[1] ?? '', 'base64url').toString('utf8')) as {
        aud: string[];
        sub: string;
        'kubernetes.io': { pod: { uid: string }; node: { name: string } };
      };
      const status: TokenReviewStatus = signed.has(t)
        ? {
            authenticated: true,
            audiences: claims.aud,
            user: {
              username: claims.sub,
              extra: {
                'authentication.kubernetes.io/pod-uid': [claims['kubernetes.io'].pod.uid],
                'authentication.kubernetes.io/node-name': [claims['kubernetes.io'].node.name],
              },
            },
          }
        : { authenticated: false, error: 'invalid bearer token, square/go-jose: error in cryptographic primitive' };
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

const REAL = token();
const OTHER_WITNESS = token({ pod: 'w2', node: 'n2', nonce: 'w2' });

function setup(opts: { pods?: V1Pod[]; signed?: string[] } = {}) {
  const api = fakeApi(new Set(opts.signed ?? [REAL, OTHER_WITNESS]));
  const clock = { now: NOW };
  const reported: { uid: string; evidence: WitnessEvidence; receivedAt: number }[] = [];
  const results: string[] = [];
  const reports = new WitnessReports({
    reviewer: new TokenReviewer(api as unknown as KubeHttp, WITNESS_AUDIENCE, () => clock.now),
    witnessNamespace: NS,
    witnesses: { list: () => opts.pods ?? [witnessPod('w1', 'n1'), witnessPod('w2', 'n2')] },
    nodes: { list: () => [node('n1'), node('n2')] },
    handover: {
      witnessReported(uid, evidence, receivedAt) {
        reported.push({ uid, evidence, receivedAt });
        return uid === 'u-old' ? { accepted: true } : { accepted: false, reason: `no pod with uid ${uid} is observed` };
      },
    },
    now: () => clock.now,
    log: pino({ level: 'silent' }),
    metrics: { witnessReports: { inc: (l: { result: string }) => results.push(l.result) } } as unknown as Pick<Metrics, 'witnessReports'>,
  });
  return { api, clock, reports, reported, results };
}

const report = (over: Record<string, unknown> = {}) =>
  JSON.stringify({ namespace: 'csi', name: 'ctrl-old', uid: 'u-old', node: 'n1', exitedBy: '2026-12-03T20:59:59.5Z', ...over });
const answer = async (r: WitnessReports, t: string | undefined, body = report()) => {
  const a = await r.receive(t, body);
  return `${a.code} ${a.message}`;
};

describe('WitnessReports', () => {
  it('accepts a Ready witness’s report about its own node, dated when it arrived', async () => {
    const { api, reports, reported, results } = setup();
    expect(await answer(reports, REAL)).toBe('202 accepted');
    expect(reported).toEqual([{ uid: 'u-old', evidence: { exitedBy: Date.parse('2026-12-03T20:59:59.5Z'), node: 'n1' }, receivedAt: NOW }]);
    expect(api.calls).toBe(1);
    expect(results).toEqual(['accepted']);
  });

  it.each<[string, string | undefined, string, string, number]>([
    ['the hello (no body) reviews the token only', REAL, '', '200 csi-handover-witness/witness-n1 may report for node n1', 1],
    ['a report about a pod the operator does not observe', REAL, report({ uid: 'u-gone' }), '409 no pod with uid u-gone', 1],
    ['an unsigned token for a real witness pod (the review refuses it)', token({ nonce: 'forged' }), report(), '401 token not authenticated', 1],
    ['no token', undefined, report(), '401 no bearer token', 0],
    ['another audience’s token', token({ aud: ['https://kubernetes.default.svc'] }), report(), '401 not a token of the witness namespace', 0],
    ['another namespace’s ServiceAccount', token({ sub: 'system:serviceaccount:default:x' }), report(), '401 not a token of the witness namespace', 0],
    ['not a JWT', 'opaque-token', report(), '401 not a token of the witness namespace', 0],
    ['an expired token', token({ exp: NOW / 1000 - 1 }), report(), '401 the token has expired', 0],
    ['a token naming no witness pod', token({ pod: 'nobody' }), report(), "403 the token's pod (uid nobody) is not a witness pod", 0],
    ['a token whose node claim is not its pod’s node', token({ node: 'n2' }), report(), '403 the token names node n2', 0],
    ['a report about another node’s pod', REAL, report({ node: 'n2' }), '403 the witness on n1 reported for node n2', 0],
    ['a body that is not JSON', REAL, '{"namespace":', '400 unreadable report', 0],
    ['a body that is not a report', REAL, report({ exitedBy: 'soon' }), '400 unreadable report', 0],
  ])('%s', async (_case, t, body, want, reviews) => {
    const { api, reports, reported } = setup();
    expect(await answer(reports, t, body)).toMatch(new RegExp(`^${want.replace(/[()]/g, '\\$&')}`));
    expect(api.calls).toBe(reviews);
    if (!want.startsWith('409')) expect(reported).toEqual([]);
  });

  it('refuses a witness pod that is not Ready without a review', async () => {
    const { api, reports } = setup({ pods: [witnessPod('w1', 'n1', { conditions: [] })] });
    expect(await answer(reports, REAL)).toBe('403 csi-handover-witness/witness-n1 is not a Ready witness on a Ready node');
    expect(api.calls).toBe(0);
  });

  it('answers a flood of 1,000 distinct junk tokens naming no witness pod without a single review', async () => {
    const { api, reports, results } = setup();
    const answers = await Promise.all(Array.from({ length: 1_000 }, (_, i) => answer(reports, token({ pod: `junk-${i}`, nonce: `${i}` }))));
    expect(new Set(answers.map((a) => a.slice(0, 3)))).toEqual(new Set(['403']));
    expect(api.calls).toBe(0);
    expect(new Set(results)).toEqual(new Set(['forbidden']));
  });

  it('reviews junk naming a real witness pod one at a time, and still accepts that witness’s report meanwhile', async () => {
    const { api, reports, reported } = setup();
    expect(await answer(reports, REAL, '')).toMatch(/^200 /);
    api.held = true;
    const flood = Array.from({ length: 200 }, (_, i) => reports.receive(token({ nonce: `junk-${i}` }), report()));
    const otherWitness = reports.receive(OTHER_WITNESS, report({ node: 'n2' }));
    // The remembered review answers the witness at once, while junk of its own pod is under review.
    expect(await answer(reports, REAL)).toBe('202 accepted');
    expect(reported).toHaveLength(1);
    expect(api.pending).toHaveLength(2);
    api.releaseAll();
    const codes = (await Promise.all(flood)).map((a) => a.code);
    expect(codes.filter((c) => c === 429)).toHaveLength(199);
    expect(codes.filter((c) => c === 401)).toHaveLength(1);
    // Another witness is not held up by this one's flood (nor by any global count of reviews).
    expect((await otherWitness).code).toBe(202);
    expect(api.maxInFlight).toBe(2);
    expect(api.calls).toBe(3);
  });

  it('still knows the witness after 2,000 refused tokens naming its pod: no new review for its report', async () => {
    const { api, reports } = setup();
    expect(await answer(reports, REAL, '')).toMatch(/^200 /);
    for (let i = 0; i < 2_000; i++) expect(await answer(reports, token({ nonce: `junk-${i}` }))).toMatch(/^401 token not authenticated/);
    expect(api.calls).toBe(2_001);
    expect(await answer(reports, REAL)).toBe('202 accepted');
    expect(api.calls).toBe(2_001);
  });

  it('refuses the remembered token once it has expired, without a review', async () => {
    const { api, clock, reports } = setup();
    expect(await answer(reports, REAL, '')).toMatch(/^200 /);
    clock.now = NOW + 3_600_000;
    expect(await answer(reports, REAL)).toMatch(/^401 the token has expired/);
    expect(api.calls).toBe(1);
  });
});
