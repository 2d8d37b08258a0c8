// Issuing the webhook's CA and serving pairs (node-forge: Node has no API to sign certificates). Loaded only
// when the leader carries out a certificate step (certs.ts plans them), so no replica keeps it in memory until then.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import forge from 'node-forge';
import { CA_CERT, CA_KEY, type CertPolicy, type CertState, type CertStep, TLS_CERT, TLS_KEY } from './certs.js';

const forgeKey = (pem: string): forge.pki.rsa.PrivateKey => forge.pki.privateKeyFromPem(pem);

function newKeyPem(): string {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
}

// Backdated a little, for API servers whose clocks run behind ours.
const SKEW_MS = 5 * 60_000;

function certificate(opts: {
  subject: string;
  issuer: forge.pki.CertificateField[] | undefined;
  keyPem: string;
  signerPem: string;
  now: number;
  validityMs: number;
  ca: boolean;
  dnsNames?: string[];
}): string {
  const key = forgeKey(opts.keyPem);
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.setRsaPublicKey(key.n, key.e);
  cert.serialNumber = `01${randomBytes(15).toString('hex')}`; // positive, 128 bits of randomness
  cert.validity.notBefore = new Date(opts.now - SKEW_MS);
  cert.validity.notAfter = new Date(opts.now + opts.validityMs);
  const subject = [{ name: 'commonName', value: opts.subject }];
  cert.setSubject(subject);
  cert.setIssuer(opts.issuer ?? subject);
  cert.setExtensions(
    opts.ca
      ? [
          { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
          { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
          { name: 'subjectKeyIdentifier' },
        ]
      : [
          { name: 'basicConstraints', cA: false, critical: true },
          { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
          { name: 'extKeyUsage', serverAuth: true },
          { name: 'subjectAltName', altNames: (opts.dnsNames ?? []).map((value) => ({ type: 2, value })) },
        ],
  );
  cert.sign(forgeKey(opts.signerPem), forge.md.sha256.create());
  return forge.pki.certificateToPem(cert);
}

export function issueCA(now: number, policy: CertPolicy): { certPem: string; keyPem: string } {
  const keyPem = newKeyPem();
  // forge encodes names as PrintableString: letters, digits and ' ()+,-./:=? only (Go's parser rejects the rest).
  const name = `csi-handover-webhook-ca-${Math.floor(now / 1000)}`;
  return { certPem: certificate({ subject: name, issuer: undefined, keyPem, signerPem: keyPem, now, validityMs: 4 * policy.validityMs, ca: true }), keyPem };
}

export function issueServing(ca: { certPem: string; keyPem: string }, now: number, policy: CertPolicy): { certPem: string; keyPem: string } {
  const keyPem = newKeyPem();
  const issuer = forge.pki.certificateFromPem(ca.certPem).subject.attributes;
  const cn = policy.dnsNames[0] ?? 'csi-handover-webhook';
  return {
    certPem: certificate({ subject: cn, issuer, keyPem, signerPem: ca.keyPem, now, validityMs: policy.validityMs, ca: false, dnsNames: policy.dnsNames }),
    keyPem,
  };
}

/** The Secret data after a step (base64), and its CA-rotation annotation. */
export function carryOut(
  step: Exclude<CertStep, { action: 'none' }>,
  state: CertState,
  policy: CertPolicy,
  now: number,
): { data: Record<string, string>; caRotatedAt: number } {
  const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');
  let cas = state.cas.map((c) => c.pem);
  let caKeyPem = state.caKeyPem ?? '';
  let serving = state.serving && { certPem: state.serving.cert.pem, keyPem: state.serving.keyPem };
  let caRotatedAt = state.caRotatedAt ?? now;
  if (step.action === 'bootstrap' || step.action === 'rotate-ca') {
    const ca = issueCA(now, policy);
    // The new CA and the one before it: every replica has moved to the one before by now (it was published and
    // spread before any pair it signed was served), so the CA before that signs nothing still served.
    cas = [ca.certPem, ...cas.slice(0, 1)];
    caKeyPem = ca.keyPem;
    caRotatedAt = now;
  }
  if (step.action === 'bootstrap' || step.action === 'rotate-serving') {
    serving = issueServing({ certPem: cas[0] ?? '', keyPem: caKeyPem }, now, policy);
  }
  return {
    data: { [CA_CERT]: b64(cas.join('')), [CA_KEY]: b64(caKeyPem), [TLS_CERT]: b64(serving?.certPem ?? ''), [TLS_KEY]: b64(serving?.keyPem ?? '') },
    caRotatedAt,
  };
}
