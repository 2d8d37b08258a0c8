// Certificate rotation of the pod admission webhook on the real cluster (make test-reliability: it waits out
// short-lived certificates, about 2.5 minutes): with a 1-minute validity the operator rotates the serving pair and
// the CA while admissions keep coming, and the API server counts none failing open.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterHttp, kubectl, waitFor } from '../../hack/lib/cluster.js';
import { grantDriverNamespace, installOperator, operatorMetric, setOperatorEnv } from '../../hack/lib/operator.js';
import { waitRolloutComplete } from '../../hack/lib/rollout.js';
import { shellController, webhookAnswered, webhookCovers, webhookFailedOpen } from '../../hack/lib/webhook-fixture.js';

const http = clusterHttp();
const NS = `cert-rotation-test-${Date.now().toString(36)}`;
const NAME = 'ctrl';

beforeAll(async () => {
  await installOperator(http);
  await kubectl('create', 'namespace', NS);
  await grantDriverNamespace(http, NS);
  await http.request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, { body: shellController(NS, NAME, 4) });
  await webhookCovers(http, NS);
  await waitRolloutComplete(http, NS, NAME, 120_000);
}, 300_000);

afterAll(async () => {
  await kubectl('delete', 'namespace', NS, '--wait=false').catch(() => undefined);
});

describe('pod admission webhook certificates', () => {
  it('rotating the serving certificate and the CA drops no admission', async () => {
    // Short-lived certificates: a pair lives 1m (renewed after 40s), the CA 4m (renewed with 2m left).
    await setOperatorEnv(http, 'WEBHOOK_CERT_VALIDITY=1m');
    try {
      const rotations = async () => ({
        ca: await operatorMetric(http, 'csi_handover_webhook_cert_rotations_total{step="rotate-ca"}'),
        serving: await operatorMetric(http, 'csi_handover_webhook_cert_rotations_total{step="rotate-serving"}'),
      });
      // The new leader moves the old 90-day CA to a 1m policy first; count from when that has settled.
      await waitFor('certificates under the short policy', 60_000, async () => (await rotations()).serving >= 1, 1000);
      const before = { ...(await rotations()), failOpen: await webhookFailedOpen(http), answered: await webhookAnswered(http) };
      const pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: {
          generateName: `${NAME}-dry-`,
          namespace: NS,
          labels: { app: NAME },
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${NAME}-dry`, uid: '00000000-0000-4000-8000-000000000001', controller: true }],
        },
        spec: { containers: [{ name: 'c', image: 'csi-handover.local/shell:v1' }] },
      };
      // Admissions go on until a CA rotation and two serving rotations have been written, and 10 s more (every
      // replica reloads the pair from the Secret's watch), or for 170 s at most.
      const rotatedEnough = async () => {
        const r = await rotations();
        return r.ca - before.ca >= 1 && r.serving - before.serving >= 2;
      };
      let sent = 0;
      let until = Date.now() + 170_000;
      let lookedAt = Date.now();
      while (Date.now() < until) {
        // Dry run: admitted through the webhook (sideEffects: None), stored nowhere.
        await http.request('POST', `/api/v1/namespaces/${NS}/pods`, { query: { dryRun: 'All' }, body: pod });
        sent++;
        await new Promise((r) => setTimeout(r, 200));
        if (Date.now() - lookedAt >= 5_000) {
          lookedAt = Date.now();
          if (until - lookedAt > 10_000 && (await rotatedEnough())) until = lookedAt + 10_000;
        }
      }
      const after = { ...(await rotations()), failOpen: await webhookFailedOpen(http), answered: await webhookAnswered(http) };
      console.log(
        `certificate rotation: ${sent} admissions, ${after.answered - before.answered} answered 200, ${after.failOpen - before.failOpen} failed open; rotations: CA ${after.ca - before.ca}, serving ${after.serving - before.serving}`,
      );
      expect(after.ca - before.ca).toBeGreaterThanOrEqual(1);
      expect(after.serving - before.serving).toBeGreaterThanOrEqual(2);
      expect(after.failOpen - before.failOpen).toBe(0);
      expect(after.answered - before.answered).toBeGreaterThanOrEqual(sent);
    } finally {
      await setOperatorEnv(http, 'WEBHOOK_CERT_VALIDITY-');
    }
  }, 600_000);
});
