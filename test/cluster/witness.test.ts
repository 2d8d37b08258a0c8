// The node witness on real nodes, containerd's and CRI-O's: it sees a leader's containers exit (the kernel's cgroup
// counts) before the kubelet reports them, and the operator releases the leases on that evidence; the admission policy holds each
// witness to its own node's pods being deleted and to its own condition; with no witness the kubelet's report
// still releases, as before.
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixedToken } from '../../src/kube/config.js';
import { KubeApiError } from '../../src/kube/errors.js';
import { KubeHttp, PatchType } from '../../src/kube/http.js';
import { kubeconfigAccess } from '../../src/kube/kubeconfig.js';
import { makeLogger } from '../../src/log.js';
import type { Handover } from '../../hack/bench/handovers.js';
import type { LeaseTimeline } from '../../hack/bench/lease-timeline.js';
import { measureHandovers } from '../../hack/bench/measure-rollout.js';
import {
  clusterHttp,
  kubeconfigPath,
  kubectl,
  nodeRuntimes,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE,
  SAMPLE_SNAPSHOT_CONTROLLER,
  waitFor,
} from '../../hack/lib/cluster.js';
import { request as httpsRequest } from 'node:https';
import { WITNESS_AUDIENCE, WITNESS_REPORT_PATH } from '../../src/handover/witness-report.js';
import {
  installOperator,
  operatorLeader,
  SAMPLE_CR_PATH,
  installWitness,
  operatorMetric,
  restartOperator,
  setOperatorMode,
  sampleAt,
  uninstallWitness,
  WITNESS_NAMESPACE as WITNESS_NS,
  witnessesReady,
} from '../../hack/lib/operator.js';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const http = clusterHttp();
const log = makeLogger('test', 'warn');
const leases = Object.values(SAMPLE_LEASES);
const dsPath = `/apis/apps/v1/namespaces/${WITNESS_NS}/daemonsets/csi-handover-witness`;

async function witnessPods(): Promise<V1Pod[]> {
  const list = await http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${WITNESS_NS}/pods`, {
    labelSelector: 'app.kubernetes.io/component=witness',
  });
  return list.items;
}

/** The cgroup v1 freezer of a pod on the local nodes (cgroupfs driver: `<cgroupRoot>/kubepods/[<qos>/]pod<uid>`). */
function freezerOf(p: V1Pod): string {
  const pod = `pod${p.metadata?.uid ?? ''}`;
  for (const root of readdirSync('/sys/fs/cgroup/freezer').filter((d) => d.startsWith('csi-handover-'))) {
    for (const qos of ['', 'burstable', 'besteffort']) {
      const dir = join('/sys/fs/cgroup/freezer', root, 'kubepods', qos, pod);
      if (existsSync(dir)) return join(dir, 'freezer.state');
    }
  }
  throw new Error(`no freezer cgroup for ${p.metadata?.name ?? ''} (${pod})`);
}

/** The operator's releases that rested on the node witness's evidence, so far. */
const witnessedReleases = () => operatorMetric(http, 'csi_handover_release_evidence_total{evidence="witness-saw-containers-exit"}');

/** The namespaces the pod admission webhook is asked about (its namespaceSelector's values; none when it matches nothing). */
async function webhookScope(): Promise<string[]> {
  const mwc = await http.get<{ webhooks: { namespaceSelector?: { matchExpressions?: { operator: string; values?: string[] }[] } }[] }>(
    '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/csi-handover',
  );
  return (mwc.webhooks[0]?.namespaceSelector?.matchExpressions ?? []).flatMap((e) => (e.operator === 'In' ? (e.values ?? []) : []));
}

/** The operator's early-started pods that lost the race for their lease, so far. */
const lostRaces = () => operatorMetric(http, 'csi_handover_overlap_lost_total');

/** The witness's reports the operator leader accepted, so far. */
const acceptedReports = () => operatorMetric(http, 'csi_handover_witness_reports_total{result="accepted"}');

/** The nodes of the pods that hold the sample's leases now. */
async function holderNodes(): Promise<Set<string>> {
  const [held, pods] = await Promise.all([
    http.get<{ items: V1Lease[] }>(`/apis/coordination.k8s.io/v1/namespaces/${SAMPLE_NAMESPACE}/leases`),
    http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${SAMPLE_NAMESPACE}/pods`),
  ]);
  const names = new Set<string>(leases);
  const holders = new Set(held.items.filter((l) => names.has(l.metadata?.name ?? '')).map((l) => l.spec?.holderIdentity));
  return new Set(pods.items.filter((p) => holders.has(p.metadata?.name)).map((p) => p.spec?.nodeName ?? ''));
}

/** A log-level change (Normal ↔ Debug), measured as make bench measures a rollout: each handover and its timeline. */
async function rollout(): Promise<{ handovers: Handover[]; timelines: LeaseTimeline[] }> {
  const cr = await http.get<{ spec?: { logLevel?: string } }>(SAMPLE_CR_PATH);
  const level = cr.spec?.logLevel === 'Debug' ? 'Normal' : 'Debug';
  const r = await measureHandovers(http, 'openshift', log, () => http.patch(SAMPLE_CR_PATH, { spec: { logLevel: level } }, PatchType.merge));
  for (const t of r.timelines) {
    console.log(
      `${t.lease}: ${t.oldPod} → ${t.newPod}: after SIGTERM, last exit +${t.lastExit} ms, evidence +${t.evidence} ms, ` +
        `release +${t.released} ms, kubelet's report +${t.kubeletReport} ms, acquired +${t.acquired} ms`,
    );
  }
  return r;
}

/** One of the controller's leases (measureHandovers adds the snapshot-controller's where an earlier test left it managed). */
const controllerLease = (lease: string) => lease !== SAMPLE_SNAPSHOT_CONTROLLER.lease;

/** The controller's leases handed over. */
const handedOver = (handovers: readonly Handover[]) =>
  handovers
    .map((h) => h.lease)
    .filter(controllerLease)
    .sort();

/** A rollout in which the witness wrote nothing: every lease still released, on the kubelet's report, as without it. */
async function expectReleasedWithoutWitness(): Promise<void> {
  const before = await witnessedReleases();
  const { handovers, timelines } = await rollout();
  expect(await witnessedReleases()).toBe(before);
  expect(handedOver(handovers)).toEqual([...leases].sort());
  for (const t of timelines) {
    expect(t.evidence, `no evidence on ${t.oldPod}`).toBeUndefined();
    expect(t.released, `${t.lease} released, not left to expire`).toBeDefined();
    if (t.kubeletReport !== undefined) expect(t.released ?? 0).toBeGreaterThanOrEqual(t.kubeletReport);
  }
}

beforeAll(async () => {
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  // A fresh operator where the leader lost a race: a race lost in an earlier file (witness-evidence's leader renews
  // through an 18 s preStop, so its early-started replacement waits a retry period) keeps the sample's new pods
  // gated for ten minutes, and the webhook asked about its namespace, which the first test checks is no longer so.
  // Each replica learns (and counts) a lost race from the Leases it watches: a leader that counts none has nothing
  // to forget.
  if ((await lostRaces()) > 0) await restartOperator(http);
  await sampleAt(http, 'openshift');
  await installWitness(http);
});

afterAll(async () => {
  await uninstallWitness();
});

describe('node witness', () => {
  it('releases each old leader’s leases on its evidence, before the kubelet reports the containers terminated, on containerd and on CRI-O', async () => {
    const runtimes = await nodeRuntimes(http);
    const lostBefore = await lostRaces();
    const byRuntime = new Map<string, LeaseTimeline[]>();
    // Old leaders on each runtime's node: when every holder runs on one node, that node is cordoned through the
    // rollout, so the new pods (the next rollout's old leaders) start on the other.
    for (let i = 0; i < 2 && byRuntime.size < new Set(runtimes.values()).size; i++) {
      const nodes = await holderNodes();
      const cordoned = nodes.size === 1 ? [...nodes] : [];
      const before = await witnessedReleases();
      const reportsBefore = await acceptedReports();
      for (const n of cordoned) await kubectl('cordon', n);
      let result: Awaited<ReturnType<typeof rollout>>;
      try {
        result = await rollout();
      } finally {
        for (const n of cordoned) await kubectl('uncordon', n);
      }
      const { handovers, timelines } = result;
      expect(handedOver(handovers)).toEqual([...leases].sort());
      // Every step is in milliseconds after the old leader's SIGTERM (the node's record), seen here by one watch.
      // The report straight to the operator usually arrives before the condition does: a release is held to the
      // old leader's last exit (its runtime's own record, the node's), which no evidence may precede.
      for (const t of timelines) {
        // The snapshot-controller's (where an earlier test left it managed) may go either way: its pod is gone about
        // 1.8 s after its SIGTERM, and a witness slowed by the node's load (a 5m CPU request, two cores for both
        // nodes) has been seen to write its condition after that, so that the kubelet's report released it.
        if (controllerLease(t.lease)) expect(t.evidence, `evidence on ${t.oldPod}`).toBeDefined();
        expect(t.released, `${t.lease} released, not left to expire`).toBeDefined();
        expect(t.lastExit, `${t.oldPod}'s last exit recorded`).toBeDefined();
        expect(t.released ?? 0).toBeGreaterThanOrEqual(t.lastExit ?? Infinity);
        const runtime = runtimes.get(t.oldNode ?? '') ?? `unknown (${t.oldNode ?? 'no node'})`;
        byRuntime.set(runtime, [...(byRuntime.get(runtime) ?? []), t]);
      }
      // The controller's releases rested on the witness's evidence (the operator's own count), and the leader took
      // each old leader's report.
      expect((await witnessedReleases()) - before).toBeGreaterThanOrEqual(handedOver(handovers).length);
      expect((await acceptedReports()) - reportsBefore).toBeGreaterThanOrEqual(
        new Set(timelines.filter((t) => controllerLease(t.lease)).map((t) => t.oldPod)).size,
      );
    }
    expect([...byRuntime.keys()].sort()).toEqual(['containerd', 'cri-o']);
    // Before the kubelet's report, on each runtime: impossible without the witness, whose rule needs that report.
    // How much before varies with the sandbox's teardown (0.2–0.6 s here), so one release ahead of its pod's report
    // proves it. On CRI-O, every container's conmon is still running then, in a cgroup of its own.
    for (const [runtime, timelines] of byRuntime) {
      expect(
        timelines.some((t) => (t.released ?? Infinity) < (t.kubeletReport ?? -Infinity)),
        `${runtime}: a release before the kubelet's report`,
      ).toBe(true);
    }
    // Every holder on a node with a live witness: new pods there start ungated anyway, so the webhook is not asked
    // (unless one of them lost the race for its lease here: then they are gated again for ten minutes).
    expect((await lostRaces()) - lostBefore, 'early-started pods that lost the race for their lease').toBe(0);
    await waitFor('the webhook no longer asked about the driver namespace', 20_000, async () => !(await webhookScope()).includes(SAMPLE_NAMESPACE));
  });

  describe('the admission policy', () => {
    const podPath = `/api/v1/namespaces/${WITNESS_NS}/pods/witness-target`;
    let target: V1Pod;
    let asNode: Map<string, KubeHttp>;

    beforeAll(async () => {
      // Each witness pod's own token: bound to the pod, so the API server knows its node.
      asNode = new Map();
      const base = kubeconfigAccess(kubeconfigPath);
      for (const p of await witnessPods()) {
        const token = (
          await kubectl('-n', WITNESS_NS, 'create', 'token', 'csi-handover-witness', '--bound-object-kind=Pod', `--bound-object-name=${p.metadata?.name}`)
        ).trim();
        asNode.set(p.spec?.nodeName ?? '', new KubeHttp({ ...base, cert: undefined, key: undefined, token: fixedToken(token) }));
      }
      expect([...asNode.keys()].sort()).toEqual(['node-1', 'node-2']);
      // A pod on node-1 that stays in the API while being deleted (a finalizer of ours holds it).
      await http.request('POST', `/api/v1/namespaces/${WITNESS_NS}/pods`, {
        body: {
          metadata: { name: 'witness-target', finalizers: ['csi-handover.io/test-hold'], labels: { test: 'witness' } },
          spec: { nodeName: 'node-1', terminationGracePeriodSeconds: 5, containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10.2' }] },
        },
      });
      target = await waitFor('the target pod running', 60_000, async () => {
        const p = await http.get<V1Pod>(podPath);
        return p.status?.phase === 'Running' ? p : undefined;
      });
    });

    afterAll(async () => {
      await http.patch(podPath, { metadata: { finalizers: null } }, PatchType.merge).catch(() => undefined);
      await http.request('DELETE', podPath).catch(() => undefined);
    });

    const condition = { type: 'csi-handover.io/containers-exited', status: 'True', reason: 'AllContainersExited', message: 'test' };
    const write = (node: string, body: unknown) =>
      (asNode.get(node) ?? http).patch(`${podPath}/status`, body, PatchType.strategic).then(
        () => 'written',
        (err: unknown) => (err instanceof KubeApiError ? `${err.status}: ${err.message}` : String(err)),
      );

    it('refuses a write on a pod not being deleted', async () => {
      expect(await write('node-1', { status: { conditions: [condition] } })).toMatch(/^403: .*only on pods already being deleted/);
    });

    it('on a pod being deleted: refuses another node’s witness, anything but its own condition; accepts its own node’s', async () => {
      await http.request('DELETE', podPath);
      await waitFor('the target being deleted', 30_000, async () => (await http.get<V1Pod>(podPath)).metadata?.deletionTimestamp != null);
      expect(target.spec?.nodeName).toBe('node-1');
      expect(await write('node-2', { status: { conditions: [condition] } })).toMatch(/^403: .*its token names node "node-2", the pod runs on "node-1"/);
      expect(await write('node-1', { metadata: { labels: { test: 'moved' } }, status: { conditions: [condition] } })).toMatch(/^403: .*no label/);
      expect(await write('node-1', { status: { conditions: [{ type: 'PodScheduled', status: 'False' }] } })).toMatch(/^403: .*no condition but/);
      expect(await write('node-1', { status: { phase: 'Failed' } })).toMatch(/^403: .*nothing else/);
      expect(await write('node-1', { status: { conditions: [condition] } })).toBe('written');
      const p = await http.get<V1Pod>(podPath);
      expect(p.status?.conditions?.find((c) => c.type === condition.type)?.status).toBe('True');
    });

    it('a report straight to the operator: taken from its own node’s witness only, with a token of the operator’s audience', async () => {
      const leader = await operatorLeader(http);
      const mwc = await http.get<{ webhooks: { clientConfig: { caBundle: string } }[] }>(
        '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/csi-handover',
      );
      const ca = Buffer.from(mwc.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8');
      const tokenOf = async (node: string, audience?: string): Promise<string> => {
        const p = (await witnessPods()).find((x) => x.spec?.nodeName === node);
        const args = ['-n', WITNESS_NS, 'create', 'token', 'csi-handover-witness', '--bound-object-kind=Pod', `--bound-object-name=${p?.metadata?.name}`];
        return (await kubectl(...args, ...(audience ? [`--audience=${audience}`] : []))).trim();
      };
      const report = (node: string) => ({
        namespace: WITNESS_NS,
        name: 'witness-target',
        uid: target.metadata?.uid,
        node,
        exitedBy: new Date().toISOString(),
        detail: 'test',
      });
      // As the witness sends it: to the replica's pod address, its certificate checked against the webhook's CA.
      const send = (token: string | undefined, body: unknown) =>
        new Promise<string>((resolve, reject) => {
          const req = httpsRequest(
            {
              host: leader.status?.podIP,
              port: 9443,
              servername: 'csi-handover-webhook.csi-handover.svc',
              ca,
              method: 'POST',
              path: WITNESS_REPORT_PATH,
              headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
            },
            (res) => {
              let text = '';
              res.on('data', (c: Buffer) => (text += c.toString()));
              res.on('end', () => resolve(`${res.statusCode}: ${text}`));
            },
          );
          req.on('error', reject);
          req.end(JSON.stringify(body));
        });
      const own = await tokenOf('node-1', WITNESS_AUDIENCE);
      expect(await send(undefined, report('node-1'))).toMatch(/^401: no bearer token/);
      // The witness's ordinary token is the API server's audience: no good here (nor is ours any good there).
      expect(await send(await tokenOf('node-1'), report('node-1'))).toMatch(/^401: not a token of the witness namespace for audience/);
      // Claims that look right, naming the real witness pod of node-1, signed by nobody: they pass the checks that
      // need no API call, and the API server's review refuses the token.
      const witness1 = (await witnessPods()).find((p) => p.spec?.nodeName === 'node-1');
      const claims = {
        aud: [WITNESS_AUDIENCE],
        sub: `system:serviceaccount:${WITNESS_NS}:csi-handover-witness`,
        exp: Math.floor(Date.now() / 1000) + 600,
        'kubernetes.io': { namespace: WITNESS_NS, pod: { name: witness1?.metadata?.name, uid: witness1?.metadata?.uid }, node: { name: 'node-1' } },
      };
      const forged = `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.x`;
      expect(await send(forged, report('node-1'))).toMatch(/^401: token not authenticated/);
      expect(await send(await tokenOf('node-2', WITNESS_AUDIENCE), report('node-1'))).toMatch(/^403: the witness on node-2 reported for node node-1/);
      expect(await send(await tokenOf('node-2', WITNESS_AUDIENCE), report('node-2'))).toMatch(/^409: pod .* runs on node-1, not node-2/);
      expect(await send(own, { ...report('node-1'), exitedBy: 'now' })).toMatch(/^400: unreadable report/);
      const accepted = await acceptedReports();
      expect(await send(own, report('node-1'))).toBe('202: accepted');
      expect(await acceptedReports()).toBe(accepted + 1);
    });
  });

  it('a frozen witness (its processes stopped by the freezer) writes nothing; the kubelet’s report releases, as without it', async () => {
    const witnesses = await witnessPods();
    const freezers = witnesses.map((p) => freezerOf(p));
    for (const f of freezers) writeFileSync(f, 'FROZEN');
    try {
      await waitFor('the witnesses frozen', 10_000, () => freezers.every((f) => readFileSync(f, 'utf8').trim() === 'FROZEN'), 100);
      await expectReleasedWithoutWitness();
    } finally {
      for (const f of freezers) writeFileSync(f, 'THAWED');
    }
  });

  it('with no witness running, the kubelet’s report still releases the leases', async () => {
    await http.patch(dsPath, { spec: { template: { spec: { nodeSelector: { 'csi-handover.io/no-such-node': 'x' } } } } }, PatchType.strategic);
    try {
      await waitFor('no witness pod', 120_000, async () => (await witnessPods()).length === 0, 500);
      // No witness: new pods may need the gate again, so the webhook is asked about the namespace again.
      await waitFor('the webhook asked about the driver namespace again', 20_000, async () => (await webhookScope()).includes(SAMPLE_NAMESPACE));
      await expectReleasedWithoutWitness();
    } finally {
      await http.patch(dsPath, { spec: { template: { spec: { nodeSelector: null } } } }, PatchType.strategic);
      await waitFor('a ready witness on every node again', 120_000, () => witnessesReady(http), 500);
    }
  });
});
