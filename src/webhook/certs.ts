// The webhook's serving certificates, issued and rotated by the operator itself (the default; on OpenShift the
// service-ca operator can do it instead). One Secret holds the CA bundle the API server trusts (`ca.crt`: the
// current CA first, then older CAs until they expire), the current CA's key, and the serving pair. Rotation never
// drops an admission: a new serving pair is signed by a CA the webhook's caBundle already carries, and a new CA
// is published in the caBundle — beside the old one — before any replica serves a pair it signed.
// Issuing is in issue.ts, loaded only by the leader when a step is due (node-forge costs ~10 MiB of RSS).
import { createPrivateKey, X509Certificate } from 'node:crypto';

/** The Secret's keys (type kubernetes.io/tls, plus the CA). */
export const CA_CERT = 'ca.crt';
export const CA_KEY = 'ca.key';
export const TLS_CERT = 'tls.crt';
export const TLS_KEY = 'tls.key';
/** On the Secret: when the current CA was made (ms since the epoch); the serving pair moves to it a while later. */
export const CA_ROTATED_AT = 'csi-handover.io/ca-rotated-at';

/** How long the API servers get to pick up a new caBundle before a pair signed by the new CA is served. */
export const CA_PROPAGATION_MS = 10_000;
/** How far a certificate may outlive the configured validity before it is replaced (clock steps, slow writes). */
const POLICY_SLACK_MS = 5 * 60_000;

export interface CertPolicy {
  /** DNS names of the webhook Service (`<svc>.<ns>.svc` and friends). */
  dnsNames: string[];
  /** A serving pair lives this long; the CA four times as long. */
  validityMs: number;
}

export interface ParsedCert {
  pem: string;
  notBefore: number;
  notAfter: number;
  subject: string;
  issuer: string;
  fingerprint: string;
  isCA: boolean;
}

export interface CertState {
  /** CAs of the bundle, current first, expired ones left out. */
  cas: ParsedCert[];
  caKeyPem?: string;
  /** `chainPem`: tls.crt as written (the leaf, and any chain after it, as service-ca writes it) */
  serving?: { cert: ParsedCert; keyPem: string; chainPem: string };
  caRotatedAt?: number;
}

const splitPems = (bundle: string): string[] => bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];

export function parseCert(pem: string): ParsedCert | undefined {
  try {
    const c = new X509Certificate(pem);
    return {
      pem: c.toString(),
      notBefore: Date.parse(c.validFrom),
      notAfter: Date.parse(c.validTo),
      subject: c.subject,
      issuer: c.issuer,
      fingerprint: c.fingerprint256,
      isCA: c.ca,
    };
  } catch {
    return undefined;
  }
}

const validKey = (pem: string | undefined): pem is string => {
  if (!pem) return false;
  try {
    createPrivateKey(pem);
    return true;
  } catch {
    return false;
  }
};

/** What a Secret's data (base64 values) holds that can be used; anything unreadable counts as absent. */
export function readCertSecret(data: Record<string, string> | undefined, annotations: Record<string, string> | undefined, now: number): CertState {
  const text = (k: string): string | undefined => (data?.[k] ? Buffer.from(data[k], 'base64').toString('utf8') : undefined);
  const cas = splitPems(text(CA_CERT) ?? '')
    .flatMap((p) => parseCert(p) ?? [])
    .filter((c) => c.isCA && c.notAfter > now);
  const caKeyPem = text(CA_KEY);
  const certPem = text(TLS_CERT);
  const keyPem = text(TLS_KEY);
  const cert = certPem ? parseCert(certPem) : undefined;
  const rotated = Number(annotations?.[CA_ROTATED_AT]);
  return {
    cas,
    caKeyPem: validKey(caKeyPem) ? caKeyPem : undefined,
    serving: cert && certPem && validKey(keyPem) && cert.notAfter > now ? { cert, keyPem, chainPem: certPem } : undefined,
    caRotatedAt: Number.isFinite(rotated) && rotated > 0 ? rotated : undefined,
  };
}

/** The serving pair verifies against one of the bundle's CAs, names the Service, and has not expired. */
export function servingTrusted(state: CertState, policy: CertPolicy, now: number): boolean {
  const s = state.serving;
  if (!s || s.cert.notBefore > now || s.cert.notAfter <= now) return false;
  const x = new X509Certificate(s.cert.pem);
  if (!policy.dnsNames.every((n) => x.checkHost(n, { subject: 'never' }) === n)) return false;
  return state.cas.some((ca) => ca.subject === s.cert.issuer && x.verify(new X509Certificate(ca.pem).publicKey));
}

export type CertStep =
  /** Nothing usable: a new CA and a serving pair it signs, at once (first install, or the Secret was lost). */
  | { action: 'bootstrap'; reason: string }
  /** A new CA beside the old one; the serving pair stays until the new CA is published. */
  | { action: 'rotate-ca'; reason: string }
  /** A new serving pair, signed by the current CA. */
  | { action: 'rotate-serving'; reason: string }
  /** Up to date; look again at `nextCheckAt`. */
  | { action: 'none'; nextCheckAt: number };

/**
 * The next rotation step. `published`: the webhook configuration's caBundle carries the current CA (every
 * webhook of it). A step is taken only when the one before it has taken effect, so the API server trusts every
 * pair a replica may serve.
 */
export function planCerts(state: CertState, policy: CertPolicy, published: boolean, now: number): CertStep {
  const current = state.cas[0];
  if (!current || !state.caKeyPem) return { action: 'bootstrap', reason: 'no usable CA' };
  if (!state.serving || !servingTrusted(state, policy, now)) {
    // A pair nobody trusts (or none) is replaced at once: nothing can be dropped that is not dropped already.
    return {
      action: 'bootstrap',
      reason: state.serving ? 'the serving certificate is not trusted by the CA bundle or does not name the Service' : 'no serving certificate',
    };
  }
  // From the end: the start is backdated for clock skew.
  const leafRenewAt = state.serving.cert.notAfter - policy.validityMs / 3;
  // Each pair expires before the CA that signed it: a CA is replaced while it still outlives two pairs.
  const caRenewAt = current.notAfter - 2 * policy.validityMs;
  const servedByCurrent = state.serving.cert.issuer === current.subject;
  const propagatedAt = (state.caRotatedAt ?? 0) + CA_PROPAGATION_MS;
  if (!servedByCurrent) {
    if (published && now >= propagatedAt) return { action: 'rotate-serving', reason: 'move the serving certificate to the new CA' };
    return { action: 'none', nextCheckAt: Math.max(propagatedAt, now + 1000) };
  }
  if (now >= caRenewAt) return { action: 'rotate-ca', reason: 'the CA is near its end' };
  // A shorter validity takes effect at once: what outlives the new policy is replaced, in the same order.
  if (current.notAfter > now + 4 * policy.validityMs + POLICY_SLACK_MS) return { action: 'rotate-ca', reason: 'the CA outlives the configured validity' };
  if (now >= leafRenewAt) return { action: 'rotate-serving', reason: 'the serving certificate is two-thirds through its life' };
  if (state.serving.cert.notAfter > now + policy.validityMs + POLICY_SLACK_MS)
    return { action: 'rotate-serving', reason: 'the serving certificate outlives the configured validity' };
  return { action: 'none', nextCheckAt: Math.min(leafRenewAt, caRenewAt) };
}

/** The DNS names a Service is reached by from the API server. */
export const serviceDnsNames = (service: string, namespace: string): string[] => [
  `${service}.${namespace}.svc`,
  `${service}.${namespace}.svc.cluster.local`,
  `${service}.${namespace}`,
];
