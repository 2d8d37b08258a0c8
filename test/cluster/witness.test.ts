// The node witness on real nodes: it sees a leader's containers exit (the kernel's cgroup counts) before the
// kubelet reports them, and the operator releases the leases on that evidence; the admission policy holds each
// witness to its own node's pods being deleted and to its own condition; with no witness the kubelet's report
// still releases, as before.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { witnessEvidence } from '../../src/handover/witness-evidence.js';
import { fixedToken } from '../../src/kube/config.js';
import { KubeApiError } from '../../src/kube/errors.js';
import { KubeHttp, PatchType } from '../../src/kube/http.js';
import { Informer } from '../../src/kube/informer.js';
import { kubeconfigAccess } from '../../src/kube/kubeconfig.js';
import { makeLogger } from '../../src/log.js';
import { handoversFrom } from '../../hack/bench/handovers.js';
import { LeaseRecorder, sigtermTimes } from '../../hack/bench/recorder.js';
import {
  clusterHttp,
  deploySample,
  kubeconfigPath,
  kubectl,
  SAMPLE_DEPLOYMENT,
  SAMPLE_DRIVER,
  SAMPLE_LEASES,
  SAMPLE_NAMESPACE as NS,
  waitFor,
} from '../../hack/lib/cluster.js';
import {
  installOperator,
  installWitness,
  operatorMetric,
  setOperatorMode,
  setSampleCrLevel,
  settledSample,
  uninstallWitness,
  WITNESS_NAMESPACE as WITNESS_NS,
  witnessesReady,
} from '../../hack/lib/operator.js';
import { waitLeasesHeldBy, waitRolloutComplete } from '../../hack/lib/rollout.js';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const http = clusterHttp();
const log = makeLogger('test', 'warn');
const leases = Object.values(SAMPLE_LEASES);
const dsPath = `/apis/apps/v1/namespaces/${WITNESS_NS}/daemonsets/csi-handover-witness`;
const crPath = `/apis/operator.openshift.io/v1/clustercsidrivers/${SAMPLE_DRIVER}`;

const allTerminated = (p: V1Pod): boolean => {
  const s = p.status?.containerStatuses ?? [];
  return s.length > 0 && s.every((c) => c.state?.terminated != null);
};

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

/** A rollout in which the witness wrote nothing: every lease still released, on the kubelet's report, as without it. */
async function expectReleasedWithoutWitness(): Promise<void> {
  const before = await witnessedReleases();
  const { handovers, times } = await rollout();
  expect(await witnessedReleases()).toBe(before);
  expect(handovers.map((h) => h.lease).sort()).toEqual([...leases].sort());
  for (const h of handovers) {
    const t = times.get(h.oldHolder);
    expect(t?.witnessAt, `no evidence on ${h.oldHolder}`).toBeUndefined();
    expect(h.releasedAt, `${h.lease} released, not left to expire`).toBeDefined();
    if (t?.kubeletAt !== undefined) expect(h.releasedAt ?? 0).toBeGreaterThanOrEqual(t.kubeletAt);
  }
}

/** Per old pod: when (arrival here) the witness's evidence and the kubelet's all-terminated report were first seen. */
interface PodTimes {
  node?: string;
  witnessAt?: number;
  exitedBy?: number;
  kubeletAt?: number;
}

/** A log-level change (Normal ↔ Debug) with every lease and pod change recorded; returns the handovers and the old pods' times. */
async function rollout() {
  const before = await settledSample(http);
  const recorder = new LeaseRecorder(http, NS, new Set(leases), log);
  await recorder.start();
  const times = new Map<string, PodTimes>();
  const pods = new Informer<V1Pod>(http, { path: `/api/v1/namespaces/${NS}/pods`, log });
  const seen = (p: V1Pod) => {
    const t = times.get(p.metadata?.name ?? '') ?? { node: p.spec?.nodeName };
    const w = witnessEvidence(p);
    if (w && t.witnessAt === undefined) Object.assign(t, { witnessAt: Date.now(), exitedBy: w.exitedBy });
    if (p.metadata?.deletionTimestamp && allTerminated(p) && t.kubeletAt === undefined) t.kubeletAt = Date.now();
    times.set(p.metadata?.name ?? '', t);
  };
  pods.on('add', seen).on('update', seen);
  pods.start();
  await pods.waitForSync();
  try {
    const cr = await http.get<{ spec?: { logLevel?: string } }>(crPath);
    await http.patch(crPath, { spec: { logLevel: cr.spec?.logLevel === 'Debug' ? 'Normal' : 'Debug' } }, PatchType.merge);
    const names = new Set(before.map((p) => p.metadata?.name));
    const after = await waitFor('new pods', 300_000, async () => {
      const now = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 300_000);
      return now.every((p) => !names.has(p.metadata?.name)) ? now : undefined;
    });
    await waitLeasesHeldBy(http, NS, leases, after, 300_000);
  } finally {
    recorder.stop();
    pods.stop();
  }
  const old = new Set(before.map((p) => p.metadata?.name ?? ''));
  const handovers = handoversFrom(recorder.observations, await sigtermTimes(NS)).filter((h) => old.has(h.oldHolder));
  return { handovers, times };
}

beforeAll(async () => {
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  await deploySample('openshift');
  await setSampleCrLevel(http, 'Normal');
  await settledSample(http);
  await installWitness(http);
});

afterAll(async () => {
  await uninstallWitness();
});

describe('node witness', () => {
  it('releases each old leader’s leases on its evidence, before the kubelet reports the containers terminated', async () => {
    const before = await witnessedReleases();
    const { handovers, times } = await rollout();
    expect(handovers.map((h) => h.lease).sort()).toEqual([...leases].sort());
    for (const h of handovers) {
      const t = times.get(h.oldHolder);
      console.log(
        `${h.lease}: ${h.oldHolder} → ${h.newHolder}: gap ${h.gapMs} ms; evidence +${(t?.witnessAt ?? NaN) - (h.stopAt ?? NaN)} ms, ` +
          `release +${(h.releasedAt ?? NaN) - (h.stopAt ?? NaN)} ms, kubelet's report +${(t?.kubeletAt ?? NaN) - (h.stopAt ?? NaN)} ms after SIGTERM`,
      );
      expect(t?.witnessAt, `evidence on ${h.oldHolder}`).toBeDefined();
      expect(h.releasedAt, `${h.lease} released, not left to expire`).toBeDefined();
      expect(h.releasedAt ?? 0).toBeGreaterThanOrEqual(t?.witnessAt ?? Infinity);
    }
    // The releases rested on the witness's evidence (the operator's own count: these, and the snapshot
    // controller's if an earlier test left it managed).
    expect((await witnessedReleases()) - before).toBeGreaterThanOrEqual(handovers.length);
    // Before the kubelet's report: impossible without the witness, whose rule needs that report. How much before
    // varies with the sandbox's teardown (0.2–0.6 s here), so one release ahead of its pod's report proves it.
    expect(handovers.some((h) => (h.releasedAt ?? Infinity) < (times.get(h.oldHolder)?.kubeletAt ?? -Infinity))).toBe(true);
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
      await expectReleasedWithoutWitness();
    } finally {
      await http.patch(dsPath, { spec: { template: { spec: { nodeSelector: null } } } }, PatchType.strategic);
      await waitFor('a ready witness on every node again', 120_000, () => witnessesReady(http), 500);
    }
  });
});
