// The fault matrix: a rollout of the sample driver (a log-level change, upstream lease timings, one replica) with
// one real fault injected mid-rollout — once its old leader is terminating — while an independent observer
// (hack/lib/observer.ts) watches the Leases and Pods and reads the nodes' record of container processes. Every
// case must end with the rollout complete, the CR's report true, nothing left behind and no invariant violated:
// no release for a holder whose processes still ran, never two live leaders.
import type { V1Deployment, V1Lease, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { RELEASED_BY_OPERATOR } from '../../src/api/names.js';
import { PatchType } from '../../src/kube/http.js';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, kubectl, SAMPLE_DEPLOYMENT, SAMPLE_LEASES, SAMPLE_NAMESPACE as NS, waitFor } from '../../hack/lib/cluster.js';
import { API_OUTAGE_S, type Fault, FAULTS, inject, operatorRelisted, operatorRestarts, operatorSteppedDown, whenTerminating } from '../../hack/lib/faults.js';
import { Observer, type ObserverReport } from '../../hack/lib/observer.js';
import {
  OPERATOR_NAMESPACE,
  SAMPLE_CR_PATH,
  sampleReport,
  setOperatorEnv,
  setSampleCrLevel,
  settledSampleLeader,
  standaloneSampleAt,
} from '../../hack/lib/operator.js';
import { deploymentPath, waitLeasesHeldBy } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const leases = Object.values(SAMPLE_LEASES);
const log = makeLogger('observer', 'error');
const GATE_TIMEOUT_MS = 20_000;
let level = 'Debug';

beforeAll(async () => {
  await standaloneSampleAt(http, level);
  // A short gate timeout, so a pod held back for a holder that cannot be proven dead starts soon.
  await setOperatorEnv(http, `GATE_TIMEOUT=${GATE_TIMEOUT_MS / 1000}s`);
}, 600_000);

afterAll(async () => {
  await setOperatorEnv(http, 'GATE_TIMEOUT-').catch(() => undefined);
});

/** The sample's CR log level flipped: a rollout of its controller. */
function flipLevel(): Promise<void> {
  level = level === 'Debug' ? 'Normal' : 'Debug';
  return setSampleCrLevel(http, level);
}

/**
 * A rollout (`trigger`, a log-level change by default) with `during` run once the old leader is terminating;
 * returns what `during` did and the observer's violations after the rollout completed and the CR settled.
 */
async function observedRollout(
  during: (oldLeader: V1Pod) => Promise<unknown>,
  trigger: () => Promise<unknown> = flipLevel,
): Promise<ObserverReport & { did: unknown; oldLeader: V1Pod }> {
  const since = new Date();
  // What the operator said about the handover, when a case fails (its pods are replaced after this file).
  onTestFailed(async () => {
    const out = await kubectl(
      '-n',
      OPERATOR_NAMESPACE,
      'logs',
      '-l',
      'app.kubernetes.io/name=csi-handover',
      '--since-time',
      since.toISOString(),
      '--tail=-1',
      '--prefix',
    ).catch((err: unknown) => String(err));
    console.error(
      `operator log since ${since.toISOString()}:\n${out
        .split('\n')
        .filter((l) => !l.includes('"level":20'))
        .join('\n')}`,
    );
  });
  const oldLeader = await settledSampleLeader(http);
  const observer = new Observer(http, { namespace: NS, leases, gateTimeoutMs: GATE_TIMEOUT_MS, log });
  await observer.start();
  let did: unknown;
  try {
    await trigger();
    await whenTerminating(http, NS, oldLeader.metadata?.name ?? '', 60_000);
    did = await during(oldLeader);
    // The rollout replaced the old leader and the new pod holds every lease.
    await waitFor(
      'a new leader for every lease',
      180_000,
      async () => {
        const pod = await settledSampleLeader(http).catch(() => undefined);
        return pod && pod.metadata?.name !== oldLeader.metadata?.name;
      },
      1_000,
    );
  } catch (err) {
    observer.stopWatching();
    throw err;
  }
  return { ...(await observer.finish(SAMPLE_DEPLOYMENT, SAMPLE_CR_PATH)), did, oldLeader };
}

const controllerPath = deploymentPath(NS, SAMPLE_DEPLOYMENT);
const containerIndex = async (name: string): Promise<number> => {
  const d = await http.get<V1Deployment>(controllerPath);
  const i = (d.spec?.template.spec?.containers ?? []).findIndex((c) => c.name === name);
  if (i < 0) throw new Error(`no container ${name} in ${SAMPLE_DEPLOYMENT}`);
  return i;
};

/** No violation, and the observer saw every lease leave the old leader (it was not blind); returns how each was freed. */
function expectSound(r: ObserverReport, oldLeader: V1Pod): string[] {
  expect(r.violations).toEqual([]);
  const from = r.handovers.filter((h) => h.oldHolder === oldLeader.metadata?.name);
  expect(new Set(from.map((h) => h.lease)), 'every lease seen leaving the old leader').toEqual(new Set(leases));
  return from.map((h) => h.freedBy);
}

describe('the observer', () => {
  it("is not blind: a release record written (with the operator's mark) for a holder that runs is a violation", async () => {
    const leader = await settledSampleLeader(http);
    const observer = new Observer(http, { namespace: NS, leases, gateTimeoutMs: GATE_TIMEOUT_MS, log });
    await observer.start();
    const lease = SAMPLE_LEASES['csi-resizer'];
    const path = `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${lease}`;
    try {
      // What a wrong release would write; the running holder simply takes its lease again on its next try.
      const l = await http.get<V1Lease>(path);
      const now = new Date().toISOString().replace('Z', '000Z'); // a MicroTime
      await http.request('PUT', path, {
        body: {
          ...l,
          metadata: { ...l.metadata, annotations: { ...l.metadata?.annotations, [RELEASED_BY_OPERATOR]: now } },
          spec: { ...l.spec, holderIdentity: '', leaseDurationSeconds: 1, acquireTime: now, renewTime: now },
        },
      });
      await waitFor(
        'the holder to take its lease again',
        30_000,
        async () => (await http.get<V1Lease>(path)).spec?.holderIdentity === leader.metadata?.name,
        250,
      );
      await waitFor('the observer to report it', 15_000, () => observer.violations().length > 0, 250);
    } finally {
      observer.stopWatching();
    }
    expect(observer.violations().map((v) => [v.invariant, v.subject])).toEqual([['release-while-running', `${NS}/${lease}`]]);
  });
});

describe('fault matrix: a rollout with one fault mid-way keeps every invariant', () => {
  it.each(FAULTS.filter((f) => f !== 'watch-expiry' && f !== 'apiserver-outage'))('%s', async (fault: Fault) => {
    const r = await observedRollout((oldLeader) => inject(fault, { http, namespace: NS, oldLeader }));
    expect(r.did).toBeTypeOf('string');
    const freedBy = expectSound(r, r.oldLeader);
    // The pod object went before the kubelet could report its containers: never proven dead.
    if (fault === 'force-delete') expect(freedBy).not.toContain('operator');
  });

  it(`apiserver-outage: the operator's leader loses its lease (${API_OUTAGE_S} s without an API server), stops its work and leads again without restarting`, async () => {
    const since = new Date();
    const restarts = await operatorRestarts(http);
    const r = await observedRollout((oldLeader) => inject('apiserver-outage', { http, namespace: NS, oldLeader }));
    expectSound(r, r.oldLeader);
    expect(await operatorSteppedDown(since), 'a replica logged "lost leadership", then "campaigning again"').toBe(true);
    // In-process: no replica exited into the kubelet's crash backoff (the observer's check of the CR's status,
    // above, needs a leader that acts again).
    expect(await operatorRestarts(http)).toEqual(restarts);
  });

  it('watch-expiry: every watch of the operator resumes with 410 Gone, relists, and the rollout still hands over', async () => {
    const since = new Date();
    const r = await observedRollout((oldLeader) => inject('watch-expiry', { http, namespace: NS, oldLeader }));
    expectSound(r, r.oldLeader);
    expect(await operatorRelisted(since), 'the operator logged a 410 relist').toBe(true);
  });
});

describe('workloads that make a handover hard', () => {
  it('a container that ignores SIGTERM keeps the old pod alive until SIGKILL: the operator never releases, the leases expire', async () => {
    // `--v` as sh's $0: the operator keeps it in step with the CR like every other container's.
    const script = 'trap "" TERM; while :; do sleep 1; done';
    await http.patch(
      controllerPath,
      [
        {
          op: 'add',
          path: '/spec/template/spec/containers/-',
          value: { name: 'stubborn', image: 'csi-handover.local/shell:v1', command: ['sh', '-c', script], args: [`--v=${level === 'Debug' ? 4 : 2}`] },
        },
      ],
      PatchType.json,
    );
    try {
      const r = await observedRollout(async () => undefined);
      const oldLeader = r.oldLeader;
      expect(expectSound(r, oldLeader)).not.toContain('operator');
      const report = await sampleReport(http);
      for (const lease of leases) {
        const h = report?.leases.find((x) => x.lease === lease && x.oldHolder === oldLeader.metadata?.name);
        expect(h?.releasedBy, `${lease}: not released while the stubborn container ran`).toBe('expiry');
      }
    } finally {
      await http.patch(controllerPath, [{ op: 'remove', path: `/spec/template/spec/containers/${await containerIndex('stubborn')}` }], PatchType.json);
    }
    await settledSampleLeader(http);
  });

  it('a sidecar that crash-loops in the new pod: the other leases hand over, its own is released and waits; fixed, it is taken', async () => {
    const attacher = await containerIndex('csi-attacher');
    const lease = SAMPLE_LEASES['csi-attacher'];
    const observer = new Observer(http, { namespace: NS, leases, gateTimeoutMs: GATE_TIMEOUT_MS, log });
    await observer.start();
    let crashing: V1Pod | undefined;
    try {
      const old = await settledSampleLeader(http);
      await http.patch(controllerPath, [{ op: 'add', path: `/spec/template/spec/containers/${attacher}/args/-`, value: '--no-such-flag' }], PatchType.json);
      crashing = await waitFor(
        'the new pod crash-looping',
        180_000,
        async () => {
          const pods = (
            await http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${NS}/pods`, { labelSelector: 'app.kubernetes.io/name=csi-hostpath-controller' })
          ).items;
          return pods.find(
            (p) => p.metadata?.name !== old.metadata?.name && (p.status?.containerStatuses?.find((c) => c.name === 'csi-attacher')?.restartCount ?? 0) >= 2,
          );
        },
        1_000,
      );
      // The four healthy sidecars lead in the new pod; the attacher's lease has no live holder.
      const others = leases.filter((l) => l !== lease);
      await waitLeasesHeldBy(http, NS, others, [crashing], 120_000);
      expect(observer.violations()).toEqual([]);
      const attacherLease = await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${lease}`);
      expect([old.metadata?.name, '']).toContain(attacherLease.spec?.holderIdentity ?? '');
    } finally {
      const d = await http.get<V1Deployment>(controllerPath);
      const args = d.spec?.template.spec?.containers?.[attacher]?.args ?? [];
      const bad = args.indexOf('--no-such-flag');
      if (bad >= 0) await http.patch(controllerPath, [{ op: 'remove', path: `/spec/template/spec/containers/${attacher}/args/${bad}` }], PatchType.json);
    }
    await settledSampleLeader(http);
    const r = await observer.finish(SAMPLE_DEPLOYMENT, SAMPLE_CR_PATH);
    const crashingName = crashing?.metadata?.name;
    expect(r.violations).toEqual([]);
    // The attacher's lease left the old leader once, to the fixed pod; the others went to the crash-looping pod.
    expect(r.handovers.filter((h) => h.lease === lease).map((h) => h.newHolder)).not.toContain(crashingName);
  });
});
