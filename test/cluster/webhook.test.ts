// The pod admission webhook on the real cluster, with a small managed controller of its own (a shell pod that
// takes a few seconds to die, and the Lease its name holds): a new pod waits behind the gate only while a
// handover is pending, and is let go right after the release; a surge rollout is never gated; with the operator
// scaled to zero new pods start at once (the API server counts the webhook failing open); an uninstall in the
// middle of a handover leaves no gate anywhere. Certificate rotation: cert-rotation.test.ts (make test-reliability).
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HANDOVER_GATE, HANDOVER_STATE, RELEASED_BY_OPERATOR } from '../../src/api/names.js';
import { PatchType } from '../../src/kube/http.js';
import { isNotFound } from '../../src/kube/errors.js';
import { clusterHttp, kubectl, waitFor } from '../../hack/lib/cluster.js';
import { grantDriverNamespace, installOperator, OPERATOR_NAMESPACE, uninstallWitness, waitOperatorPodsGone } from '../../hack/lib/operator.js';
import { shellController, webhookAnswered, webhookCovers, webhookFailedOpen } from '../../hack/lib/webhook-fixture.js';
import { deploymentPath, rolloutRestart, waitRolloutComplete } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const NS = `webhook-test-${Date.now().toString(36)}`;
const NAME = 'ctrl';
const LEASE = 'ctrl-leader';
const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${LEASE}`;

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

beforeAll(async () => {
  // The gate is what is under test: where a node witness runs, new pods start ungated (witness.test.ts).
  await uninstallWitness();
  await installOperator(http);
  await kubectl('create', 'namespace', NS);
  await grantDriverNamespace(http, NS);
  await http.request('POST', `/apis/apps/v1/namespaces/${NS}/deployments`, { body: shellController(NS, NAME, 4) });
  await webhookCovers(http, NS);
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
    const answeredBefore = await webhookAnswered(http);
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
    expect(await webhookAnswered(http)).toBeGreaterThan(answeredBefore);
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
      const failOpenBefore = await webhookFailedOpen(http);
      const next = await replace(old);
      expect(gated(next)).toBe(false);
      expect(next.metadata?.annotations?.[HANDOVER_STATE]).toBeUndefined();
      expect(await webhookFailedOpen(http)).toBeGreaterThan(failOpenBefore);
      await waitFor('the new pod running', 60_000, async () =>
        (await live()).some((p) => p.metadata?.uid === next.metadata?.uid && p.status?.phase === 'Running'),
      );
    } finally {
      await kubectl('-n', OPERATOR_NAMESPACE, 'scale', 'deployment/csi-handover', '--replicas=2');
      await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
    }
  });

  it('uninstalling the operator while a new pod waits at the gate leaves no gate anywhere', async () => {
    // A holder that takes 20s to die: its replacement waits at the gate while the operator goes, and the operator is
    // back before it dies (here it went in about 2s and was back in about 11).
    await http.patch(
      deploymentPath(NS, NAME),
      { spec: { template: { spec: { containers: [{ name: 'leader', env: [{ name: 'DIE_AFTER', value: '20' }] }] } } } },
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
    // Still dying, not dead: the gate was lifted by the operator going, not by a release.
    const holder = (await pods()).find((p) => p.metadata?.uid === old.metadata?.uid);
    expect(holder?.status?.containerStatuses?.[0]?.state?.running, 'the old holder still runs once the operator is gone').toBeDefined();
    await installOperator(http);
    await http.patch(
      deploymentPath(NS, NAME),
      { spec: { template: { spec: { containers: [{ name: 'leader', env: [{ name: 'DIE_AFTER', value: '4' }] }] } } } },
      PatchType.strategic,
    );
    await webhookCovers(http, NS);
    await onlyPod();
  });
});
