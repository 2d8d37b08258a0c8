// The race the release write must survive: the holder's identity renews between the operator's read and
// its write. To make it happen deterministically, a validating admission webhook (a real Kubernetes
// mechanism, served by this test) renews the lease under the old identity while the API server holds the
// operator's release request; the release then carries a stale resourceVersion and must fail with 409, and
// the operator, deciding again, must see the renewal and not release.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Lease } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { microTime } from '../../src/leaderelection/lease-record.js';
import { makeLogger } from '../../src/log.js';
import { LeaseRecorder } from '../../hack/bench/recorder.js';
import { clusterHttp, kubectl, localDir, waitFor } from '../../hack/lib/cluster.js';
import { grantDriverNamespace, installOperator, operatorMetric } from '../../hack/lib/operator.js';
import { waitRolloutComplete } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const NS = `race-${Date.now().toString(36)}`;
const LEASE = 'race-lease';
const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${LEASE}`;
const PORT = 20443;
let server: Server | undefined;
let releaseAttempts = 0;
let renewals = 0;

/** A serving certificate for 127.0.0.1 signed by the local cluster's CA, so the API server trusts it. */
function webhookCert(): { key: string; cert: string; ca: string } {
  const dir = mkdtempSync(join(tmpdir(), 'race-webhook-'));
  const pki = join(localDir, 'pki');
  try {
    writeFileSync(join(dir, 'ext'), 'subjectAltName=IP:127.0.0.1\n');
    execFileSync('openssl', ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key'), '-out', join(dir, 'csr'), '-subj', '/CN=race-webhook'], {
      stdio: 'ignore',
    });
    execFileSync(
      'openssl',
      [
        'x509',
        '-req',
        '-in',
        join(dir, 'csr'),
        '-CA',
        join(pki, 'ca.crt'),
        '-CAkey',
        join(pki, 'ca.key'),
        '-CAcreateserial',
        '-out',
        join(dir, 'crt'),
        '-days',
        '1',
        '-extfile',
        join(dir, 'ext'),
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key'), 'utf8'), cert: readFileSync(join(dir, 'crt'), 'utf8'), ca: readFileSync(join(pki, 'ca.crt'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true }); // the key stays in memory only; nothing left in /tmp
  }
}

/** What the old identity's process would do if it were still (or again) alive: renew, keeping its identity. */
async function renewAsHolder(): Promise<void> {
  const lease = await http.get<V1Lease>(leasePath);
  await http.request('PUT', leasePath, { body: { ...lease, spec: { ...lease.spec, renewTime: microTime(Date.now()) } } });
}

beforeAll(async () => {
  await installOperator(http);
  await kubectl('create', 'namespace', NS);
  await kubectl('label', 'namespace', NS, 'csi-handover-test=race');
  await grantDriverNamespace(http, NS);
  // A managed workload whose pod will "hold" the lease.
  await http.request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, {
    body: {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'holder', labels: { 'csi-handover.io/driver': 'race.csi.example.com' } },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'holder' } },
        template: {
          metadata: { labels: { app: 'holder' } },
          spec: {
            terminationGracePeriodSeconds: 5,
            containers: [{ name: 'c', image: 'csi-handover.local/shell:v1', command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 0.2; done'] }],
          },
        },
      },
    },
  });
  const { key, cert, ca } = webhookCert();
  server = createServer({ key, cert }, (req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const review = JSON.parse(body) as { request: { uid: string; name: string; object?: { spec?: { holderIdentity?: string } } } };
      const respond = () =>
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            apiVersion: 'admission.k8s.io/v1',
            kind: 'AdmissionReview',
            response: { uid: review.request.uid, allowed: true },
          }),
        );
      const isRelease = review.request.name === LEASE && (review.request.object?.spec?.holderIdentity ?? '') === '';
      if (!isRelease) return respond();
      releaseAttempts++;
      // Hold the release request, renew under the old identity a moment later, then let the request go on.
      setTimeout(() => {
        renewAsHolder()
          .then(
            () => renewals++,
            () => undefined,
          )
          .finally(respond);
      }, 1_500);
    });
  });
  await new Promise<void>((resolve) => server?.listen(PORT, '127.0.0.1', resolve));
  await http.request('POST', '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
    body: {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: `race-${NS}` },
      webhooks: [
        {
          name: 'race.csi-handover.test',
          admissionReviewVersions: ['v1'],
          sideEffects: 'NoneOnDryRun',
          failurePolicy: 'Ignore',
          timeoutSeconds: 10,
          clientConfig: { url: `https://127.0.0.1:${PORT}/validate`, caBundle: Buffer.from(ca).toString('base64') },
          namespaceSelector: { matchLabels: { 'csi-handover-test': 'race' } },
          rules: [{ apiGroups: ['coordination.k8s.io'], apiVersions: ['v1'], resources: ['leases'], operations: ['UPDATE'] }],
        },
      ],
    },
  });
});

afterAll(async () => {
  await http.request('DELETE', `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/race-${NS}`).catch(() => undefined);
  server?.close();
  await kubectl('delete', 'namespace', NS, '--wait=false').catch(() => undefined);
});

const releaseConflicts = () => operatorMetric(http, 'csi_handover_release_conflicts_total');

it('a renewal between the operator’s read and write → 409, decided again, no release', async () => {
  const [pod] = await waitRolloutComplete(http, NS, 'holder', 120_000);
  const holder = pod?.metadata?.name ?? '';
  await http.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`, {
    body: {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: LEASE },
      spec: { holderIdentity: holder, leaseDurationSeconds: 120, acquireTime: microTime(Date.now()), renewTime: microTime(Date.now()), leaseTransitions: 0 },
    },
  });
  const conflictsBefore = await releaseConflicts();
  const recorder = new LeaseRecorder(http, NS, new Set([LEASE]), makeLogger('test', 'warn'));
  await recorder.start();
  try {
    // The holder's pod ends gracefully: its containers terminate, so the operator sets out to release.
    await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${holder}`);
    await waitFor('the operator’s release attempt and the webhook’s renewal', 60_000, () => renewals >= 1);
    await waitFor('the 409 counted by the operator', 30_000, async () => (await releaseConflicts()) > conflictsBefore);
    // Give the operator time to decide again (it sees the renewal): nothing may release the lease.
    const until = Date.now() + 5_000;
    await waitFor('the observation window', 10_000, () => Date.now() >= until, 250);
  } finally {
    recorder.stop();
  }
  expect(releaseAttempts).toBeGreaterThanOrEqual(1);
  expect(recorder.observations.filter((o) => o.holder === '')).toEqual([]);
  expect((await http.get<V1Lease>(leasePath)).spec?.holderIdentity).toBe(holder);
});
