// The webhook's wire format (never a refusal), its namespace selector, and the certificate rotation steps:
// every pair a replica may serve is trusted by the caBundle the API server has at that moment.
import { describe, expect, it } from 'vitest';
import { namespaceSelectorFor } from '../../src/controller/webhook.js';
import { AdmissionReview, allowed, podOf } from '../../src/webhook/admission.js';
import { carryOut } from '../../src/webhook/issue.js';
import {
  CA_CERT,
  CA_PROPAGATION_MS,
  CA_ROTATED_AT,
  type CertPolicy,
  type CertState,
  planCerts,
  readCertSecret,
  servingTrusted,
  serviceDnsNames,
  TLS_CERT,
  TLS_KEY,
} from '../../src/webhook/certs.js';

const review = (object: unknown, extra: Record<string, unknown> = {}) => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u-1', kind: { group: '', version: 'v1', kind: 'Pod' }, operation: 'CREATE', namespace: 'csi', object, ...extra },
});

describe('AdmissionReview', () => {
  it('reads a pod create, and fills the namespace from the request', () => {
    const r = AdmissionReview.parse(review({ metadata: { generateName: 'ctrl-', labels: { app: 'x' } }, spec: { containers: [] } }));
    expect(podOf(r).metadata).toMatchObject({ namespace: 'csi', generateName: 'ctrl-', labels: { app: 'x' } });
  });

  it.each<[string, unknown]>([
    ['no request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }],
    ['an older review version', { ...review({}), apiVersion: 'admission.k8s.io/v1beta1' }],
    ['no uid', review({}, { uid: '' })],
    ['labels that are not strings', review({ metadata: { labels: { a: 1 } } })],
  ])('refuses to read %s (the server answers 400; the API server admits the pod unchanged)', (_n, body) => {
    expect(AdmissionReview.safeParse(body).success).toBe(false);
  });

  it('answers allowed, with a base64 JSON patch only when there is one', () => {
    expect(allowed('u')).toEqual({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'u', allowed: true } });
    const a = allowed('u', [{ op: 'add', path: '/x', value: 1 }]) as { response: { patch: string; patchType: string } };
    expect(a.response.patchType).toBe('JSONPatch');
    expect(JSON.parse(Buffer.from(a.response.patch, 'base64').toString())).toEqual([{ op: 'add', path: '/x', value: 1 }]);
  });
});

describe('namespaceSelectorFor', () => {
  it('names the managed namespaces once each, sorted; with none it matches no namespace at all', () => {
    expect(namespaceSelectorFor(['b', 'a', 'b', ''])).toEqual({
      matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['a', 'b'] }],
    });
    expect(namespaceSelectorFor([])).toEqual({ matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'DoesNotExist' }] });
  });
});

describe('webhook certificates', () => {
  const policy: CertPolicy = { dnsNames: serviceDnsNames('csi-handover-webhook', 'csi-handover'), validityMs: 60 * 60_000 };
  const T0 = Date.parse('2026-12-01T00:00:00Z');
  /** One rotation step carried out, read back the way the controller reads the Secret. */
  const step = (state: CertState, now: number, published: boolean) => {
    const plan = planCerts(state, policy, published, now);
    if (plan.action === 'none') return { plan, state };
    const next = carryOut(plan, state, policy, now);
    return { plan, state: readCertSecret(next.data, { [CA_ROTATED_AT]: String(next.caRotatedAt) }, now) };
  };
  const empty = readCertSecret(undefined, undefined, T0);

  it('bootstraps a CA and a serving pair for the Service names, then has nothing to do until two-thirds of the pair’s life', () => {
    const { plan, state } = step(empty, T0, false);
    expect(plan.action).toBe('bootstrap');
    expect(servingTrusted(state, policy, T0)).toBe(true);
    expect(state.cas).toHaveLength(1);
    // Names are encoded as PrintableString, which strict parsers (Go's) hold to its alphabet.
    for (const c of [state.cas[0]!, state.serving!.cert]) expect(c.subject).toMatch(/^CN=[A-Za-z0-9 '()+,\-./:=?]+$/);
    const quiet = planCerts(state, policy, true, T0 + 1000);
    expect(quiet).toEqual({ action: 'none', nextCheckAt: expect.any(Number) });
    expect((quiet as { nextCheckAt: number }).nextCheckAt).toBeGreaterThan(T0 + 0.6 * policy.validityMs);
  });

  it('unreadable Secret data counts as absent: a new CA and pair, never a crash', () => {
    const junk = readCertSecret({ [CA_CERT]: 'bm90IGEgY2VydA==', [TLS_CERT]: '!!', [TLS_KEY]: '' }, undefined, T0);
    expect(junk).toMatchObject({ cas: [], serving: undefined, caKeyPem: undefined });
    expect(planCerts(junk, policy, false, T0).action).toBe('bootstrap');
  });

  it('a shorter validity takes effect at once: the CA first, then (once published) the pair', () => {
    const { state } = step(empty, T0, false);
    const shorter = { ...policy, validityMs: 60_000 };
    expect(planCerts(state, shorter, true, T0 + 1000)).toMatchObject({ action: 'rotate-ca', reason: 'the CA outlives the configured validity' });
    const next = carryOut({ action: 'rotate-ca', reason: '' }, state, shorter, T0 + 1000);
    const rotated = readCertSecret(next.data, { [CA_ROTATED_AT]: String(next.caRotatedAt) }, T0 + 1000);
    expect(planCerts(rotated, shorter, true, T0 + 1000 + CA_PROPAGATION_MS).action).toBe('rotate-serving');
  });

  it('serves tls.crt as written: a leaf followed by its chain (as service-ca writes it) keeps the chain', () => {
    const { state } = step(empty, T0, false);
    const chain = state.serving!.cert.pem + state.cas[0]!.pem;
    const b64 = (x: string) => Buffer.from(x).toString('base64');
    const read = readCertSecret({ [TLS_CERT]: b64(chain), [TLS_KEY]: b64(state.serving!.keyPem) }, undefined, T0);
    expect(read.serving?.chainPem).toBe(chain);
    expect(read.serving?.cert.subject).toBe(state.serving!.cert.subject);
    expect(read.cas).toEqual([]); // service-ca's Secret has no ca.crt: the operator issues nothing from it
  });

  it('a pair that does not name the Service is replaced', () => {
    const { state } = step(empty, T0, false);
    const other = { ...policy, dnsNames: serviceDnsNames('renamed', 'csi-handover') };
    expect(planCerts(state, other, true, T0).action).toBe('bootstrap');
  });

  it('rotates over a CA’s life without ever serving a pair the published bundle does not trust', () => {
    let { state } = step(empty, T0, false);
    let published = state.cas.map((c) => c.pem); // the caBundle the API server has
    const seen: string[] = [];
    for (let now = T0; now < T0 + 12 * policy.validityMs; now += 5 * 60_000) {
      const isPublished = state.cas[0] !== undefined && published.includes(state.cas[0].pem);
      const r = step(state, now, isPublished);
      if (r.plan.action !== 'none') seen.push(r.plan.action);
      state = r.state;
      // What a replica serves now must verify against what the API server trusts now.
      expect(servingTrusted({ ...state, cas: state.cas.filter((c) => published.includes(c.pem)) }, policy, now)).toBe(true);
      published = state.cas.map((c) => c.pem); // the controller then publishes the Secret's bundle
    }
    expect(seen.filter((s) => s === 'bootstrap')).toHaveLength(0);
    expect(seen.filter((s) => s === 'rotate-ca').length).toBeGreaterThanOrEqual(2);
    expect(seen.filter((s) => s === 'rotate-serving').length).toBeGreaterThanOrEqual(10);
    expect(state.cas.length).toBeLessThanOrEqual(2); // expired CAs leave the bundle
  }, 60_000);

  it('after a CA rotation the pair moves to the new CA only once the bundle is published and has had time to spread', () => {
    let { state: fresh } = step(empty, T0, false);
    const caDue = fresh.cas[0]!.notAfter - 2 * policy.validityMs;
    // The pair kept fresh up to the CA's rotation, as the operator does.
    for (let now = T0 + 20 * 60_000; now < caDue; now += 20 * 60_000) fresh = step(fresh, now, true).state;
    const { plan, state } = step(fresh, caDue, true);
    expect(plan.action).toBe('rotate-ca');
    expect(state.cas).toHaveLength(2);
    expect(state.serving!.cert.issuer).toBe(state.cas[1]!.subject); // still the old CA's pair
    expect(planCerts(state, policy, false, caDue + CA_PROPAGATION_MS + 1).action).toBe('none'); // not published yet
    expect(planCerts(state, policy, true, caDue + 1).action).toBe('none'); // published, not spread yet
    expect(planCerts(state, policy, true, caDue + CA_PROPAGATION_MS).action).toBe('rotate-serving');
  }, 30_000);
});
