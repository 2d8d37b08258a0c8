// The pod admission webhook on the real cluster, with a small managed controller of its own (a shell pod that
// takes a few seconds to die, and the Lease its name holds): a new pod waits behind the gate only while a
// handover is pending, and is let go right after the release; a surge rollout is never gated; with the operator
// scaled to zero new pods start at once; an uninstall in the middle of a handover leaves no gate anywhere; and
// certificate rotation (CA and serving pair) drops no admission — counted by the API server itself.
import type { V1Deployment, V1Lease, V1MutatingWebhookConfiguration, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DRIVER_LABEL, HANDOVER_GATE, HANDOVER_STATE, RELEASED_BY_OPERATOR } from '../../src/api/names.js';
import { PatchType } from '../../src/kube/http.js';
import { isNotFound } from '../../src/kube/errors.js';
import { clusterHttp, kubectl, waitFor } from '../../hack/lib/cluster.js';
import { grantDriverNamespace, installOperator, OPERATOR_NAMESPACE, operatorMetric, setOperatorEnv, waitOperatorPodsGone } from '../../hack/lib/operator.js';
import { deploymentPath, rolloutRestart, waitRolloutComplete } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const NS = `webhook-test-${Date.now().toString(36)}`;
const NAME = 'ctrl';
const LEASE = 'ctrl-leader';
const WEBHOOK = 'pods.csi-handover.io';
const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${LEASE}`;

function deployment(dieAfterSeconds: number): V1Deployment {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: NAME, namespace: NS, labels: { [DRIVER_LABEL]: 'webhook-test.example.com' } },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: NAME } },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      template: {
        metadata: { labels: { app: NAME } },
        spec: {
          terminationGracePeriodSeconds: 60,
          containers: [
            {
              name: 'leader',
              image: 'csi-handover.local/shell:v1',
              env: [{ name: 'DIE_AFTER', value: String(dieAfterSeconds) }],
              // Dies $DIE_AFTER seconds after SIGTERM: a holder that is terminating, and not yet dead, for that long.
              command: ['sh', '-c', 'trap "sleep $DIE_AFTER; exit 0" TERM; while true; do sleep 1; done'],
            },
          ],
        },
      },
    },
  };
}

const pods = async (): Promise<V1Pod[]> => (await http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${NS}/pods`, { labelSelector: `app=${NAME}` })).items;
const live = async (): Promise<V1Pod[]> => (await pods()).filter((p) => !p.metadata?.deletionTimestamp);
const gated = (p: V1Pod): boolean => (p.spec?.schedulingGates ?? []).some((g) => g.name === HANDOVER_GATE);

/** The Lease names the pod as its holder, freshly renewed, as a sidecar leader's would. */
async function holdLease(pod: V1Pod): Promise<void> {
  const now = new Date().toISOString().replace('Z', '000Z');
  const spec = { holderIdentity: pod.metadata?.name, leaseDurationSeconds: 137, acquireTime: now, renewTime: now, leaseTransitions: 0 };
  const existing = await http.get<V1Lease>(leasePath).catch((err: unknown) => (isNotFound(err) ? undefined : Promise.reject(err)));
  if (existing) await http.request('PUT', leasePath, { body: { ...existing, metadata: { ...existing.metadata, annotations: {} }, spec } });
  else
    await http.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`, {
      body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: LEASE, namespace: NS }, spec },
    });
}

async function onlyPod(): Promise<V1Pod> {
  const [p] = await waitRolloutComplete(http, NS, NAME, 120_000);
  if (!p) throw new Error('no pod');
  return p;
}

/** Deletes the pod and returns its replacement once the ReplicaSet made it. */
async function replace(pod: V1Pod): Promise<V1Pod> {
  await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${pod.metadata?.name}`);
  return waitFor('the replacement pod', 30_000, async () => (await live()).find((p) => p.metadata?.uid !== pod.metadata?.uid), 50);
}

async function apiserverMetric(series: string): Promise<number> {
  const text = await http.get<string>('/metrics');
  return text
    .split('\n')
    .filter((l) => l.startsWith(series))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}
const failOpen = () => apiserverMetric(`apiserver_admission_webhook_fail_open_count{name="${WEBHOOK}"`);
const answered = () => apiserverMetric(`apiserver_admission_webhook_request_total{code="200",name="${WEBHOOK}"`);

/** The operator has narrowed the webhook to our namespace (it follows the managed Deployments). */
async function webhookCovers(namespace: string): Promise<void> {
  await waitFor(`the webhook asks about ${namespace}`, 30_000, async () => {
    const mwc = await http.get<V1MutatingWebhookConfiguration>('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/csi-handover');
    return mwc.webhooks?.every((w) => w.namespaceSelector?.matchExpressions?.some((e) => e.operator === 'In' && e.values?.includes(namespace)));
  });
}

beforeAll(async () => {
  await installOperator(http);
  await kubectl('create', 'namespace', NS);
  await grantDriverNamespace(http, NS);
  await http.request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, { body: deployment(4) });
  await webhookCovers(NS);
  await onlyPod();
}, 300_000);

afterAll(async () => {
  await kubectl('-n', OPERATOR_NAMESPACE, 'scale', 'deployment/csi-handover', '--replicas=2').catch(() => undefined);
  await kubectl('delete', 'namespace', NS, '--wait=false').catch(() => undefined);
});

describe('pod admission webhook', () => {
  it('gates the replacement of a terminating leader, and lets it go right after the release', async () => {
    const old = await onlyPod();
    await holdLease(old);
    const answeredBefore = await answered();
    const next = await replace(old);
    // Gated at creation: the pod was never schedulable before the release.
    expect(next.metadata?.annotations?.[HANDOVER_STATE]).toMatch(/^(waiting for|started: )/);
    const started = await waitFor(
      'the gate lifted',
      60_000,
      async () => {
        const p = (await live()).find((x) => x.metadata?.uid === next.metadata?.uid);
        return p && !gated(p) ? p : undefined;
      },
      100,
    );
    expect(started.metadata?.annotations?.[HANDOVER_STATE]).toBe('started: the old leader released its leases');
    const lease = await http.get<V1Lease>(leasePath);
    expect(lease.spec?.holderIdentity ?? '').toBe('');
    expect(lease.metadata?.annotations?.[RELEASED_BY_OPERATOR]).toBeDefined();
    expect(await answered()).toBeGreaterThan(answeredBefore);
    await onlyPod();
  });

  it('a surge rollout (maxSurge 1) is never gated: its new pod starts while the old leader runs, and the rollout completes', async () => {
    await http.patch(deploymentPath(NS, NAME), { spec: { strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } } }, PatchType.strategic);
    await holdLease(await onlyPod());
    const t0 = Date.now();
    await rolloutRestart(http, NS, NAME);
    const [p] = await waitFor(
      'the surge rollout done',
      120_000,
      async () => {
        const all = await pods();
        return all.length === 1 &&
          !all[0]?.metadata?.deletionTimestamp &&
          all[0]?.status?.phase === 'Running' &&
          all[0].metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']
          ? all
          : undefined;
      },
      250,
    );
    console.log(
      `surge rollout: ${((Date.now() - t0) / 1000).toFixed(1)}s, new pod ${p?.metadata?.name} annotations ${JSON.stringify(p?.metadata?.annotations ?? {})}`,
    );
    expect(p?.metadata?.annotations?.[HANDOVER_STATE]).toBeUndefined();
    await http.patch(deploymentPath(NS, NAME), { spec: { strategy: { rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } } } }, PatchType.strategic);
    await onlyPod();
  });

  it('with the operator scaled to zero, new pods are admitted at once, ungated (the API server fails open)', async () => {
    await kubectl('-n', OPERATOR_NAMESPACE, 'scale', 'deployment/csi-handover', '--replicas=0');
    await waitOperatorPodsGone(http);
    try {
      const old = await onlyPod();
      await holdLease(old);
      const failOpenBefore = await failOpen();
      const next = await replace(old);
      expect(gated(next)).toBe(false);
      expect(next.metadata?.annotations?.[HANDOVER_STATE]).toBeUndefined();
      expect(await failOpen()).toBeGreaterThan(failOpenBefore);
      await waitFor('the new pod running', 60_000, async () =>
        (await live()).some((p) => p.metadata?.uid === next.metadata?.uid && p.status?.phase === 'Running'),
      );
    } finally {
      await kubectl('-n', OPERATOR_NAMESPACE, 'scale', 'deployment/csi-handover', '--replicas=2');
      await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
    }
  });

  it('uninstalling the operator while a new pod waits at the gate leaves no gate anywhere', async () => {
    // A holder that takes 40s to die: its replacement waits at the gate while the operator goes.
    await http.patch(
      deploymentPath(NS, NAME),
      { spec: { template: { spec: { containers: [{ name: 'leader', env: [{ name: 'DIE_AFTER', value: '40' }] }] } } } },
      PatchType.strategic,
    );
    const old = await onlyPod();
    await holdLease(old);
    const next = await replace(old);
    expect(gated(next)).toBe(true);
    await kubectl('-n', OPERATOR_NAMESPACE, 'delete', 'deployment', 'csi-handover', '--wait=true');
    await waitOperatorPodsGone(http);
    const everywhere = (await http.get<{ items: V1Pod[] }>('/api/v1/pods')).items.filter(gated).map((p) => `${p.metadata?.namespace}/${p.metadata?.name}`);
    expect(everywhere).toEqual([]);
    await installOperator(http);
    await http.patch(
      deploymentPath(NS, NAME),
      { spec: { template: { spec: { containers: [{ name: 'leader', env: [{ name: 'DIE_AFTER', value: '4' }] }] } } } },
      PatchType.strategic,
    );
    await webhookCovers(NS);
    await onlyPod();
  });

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
      const before = { ...(await rotations()), failOpen: await failOpen(), answered: await answered() };
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
      const after = { ...(await rotations()), failOpen: await failOpen(), answered: await answered() };
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
