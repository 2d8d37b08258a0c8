// Death evidence only the witness can give, tried as an attacker would on real nodes. The leader's csi-attacher
// keeps running and renewing its Lease through an 18 s preStop after its pod is deleted; meanwhile someone writes
// the witness's condition on the pod, or sends the operator a report: a ServiceAccount that may only patch
// pods/status, a pod of another namespace's "witness", the real witness's own token with an impossible time, a
// flood of junk tokens. Whatever is written, no Lease may be released before the old leader's last process exits
// (the node's own record), and each refusal is the operator's or the API server's, as each case says.
import type { V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeLogger } from '../../src/log.js';
import { KubeApiError } from '../../src/kube/errors.js';
import { PatchType } from '../../src/kube/http.js';
import { witnessCondition } from '../../src/handover/witness-evidence.js';
import { WITNESS_AUDIENCE } from '../../src/handover/witness-report.js';
import type { LeaseObservation } from '../../hack/bench/handovers.js';
import { LeaseRecorder } from '../../hack/bench/recorder.js';
import { clusterHttp, kubectl, nodeEvents, SAMPLE_DEPLOYMENT, SAMPLE_LEASES, SAMPLE_NAMESPACE as NS, waitFor } from '../../hack/lib/cluster.js';
import { installOperator, installWitness, operatorMetric, setOperatorMode, sampleAt, settledSampleLeader, WITNESS_NAMESPACE } from '../../hack/lib/operator.js';
import { waitRolloutComplete } from '../../hack/lib/rollout.js';
import { clientWithToken, podBoundToken, sendWitnessReport, witnessPods, witnessToken } from '../../hack/lib/witness.js';

const http = clusterHttp();
const log = makeLogger('test', 'warn');
const leases = Object.values(SAMPLE_LEASES);
/** Long enough for each case's attempts (a few seconds; up to 10 s for a refusal to be counted) before it ends. */
const PRESTOP_S = 18;
const FORGER = 'evidence-forger';
const OTHER_NS = 'witness-elsewhere';
const GRANT = '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/csi-handover-witness';

const rejected = (source: string, reason: string) =>
  operatorMetric(http, `csi_handover_witness_evidence_rejected_total{source="${source}",reason="${reason}"}`);
const inForce = () => operatorMetric(http, 'csi_handover_witness_policy_in_force');
const podPath = (p: V1Pod) => `/api/v1/namespaces/${p.metadata?.namespace ?? ''}/pods/${p.metadata?.name ?? ''}`;
const evidence = (node: string, exitedBy: number) => ({ status: { conditions: [witnessCondition({ exitedBy, node }, 'written by the test', Date.now())] } });
/** Whether `what` came true within `ms`: a case records it, so a protection removed shows up in the leases too. */
const cameTrue = (what: string, ms: number, check: () => Promise<boolean>) =>
  waitFor(what, ms, check, 200).then(
    () => true,
    () => false,
  );
const answer = (p: Promise<unknown>) =>
  p.then(
    () => 'written',
    (err: unknown) => (err instanceof KubeApiError ? `${err.status}: ${err.message}` : String(err)),
  );

/** A token of a ServiceAccount that may get and patch pods/status in the driver's namespace, and nothing else. */
async function forgerToken(): Promise<string> {
  await kubectl('-n', NS, 'create', 'serviceaccount', FORGER).catch(() => undefined);
  await kubectl('-n', NS, 'create', 'role', FORGER, '--verb=get,patch,update', '--resource=pods/status').catch(() => undefined);
  await kubectl('-n', NS, 'create', 'rolebinding', FORGER, `--role=${FORGER}`, `--serviceaccount=${NS}:${FORGER}`).catch(() => undefined);
  return (await kubectl('-n', NS, 'create', 'token', FORGER)).trim();
}

/** When the node saw container `container` of `pod` exit. */
async function exitOf(pod: string, container: string): Promise<number> {
  const exits = (await nodeEvents()).filter((e) => e.pod === pod && e.container === container && e.event === 'container-exited');
  expect(exits.length, `${container} of ${pod} exited`).toBeGreaterThan(0);
  return Math.max(...exits.map((e) => Date.parse(e.t)));
}

interface Deletion {
  name: string;
  deletedAt: number;
  /** When the case's attempts were all made: each must come while the old leader still runs, or it proves nothing. */
  meddledAt: number;
  observations: LeaseObservation[];
}

/**
 * Deletes the settled leader and, while its csi-attacher runs through its preStop, calls `meddle`; then waits for
 * the new pod to hold every lease. What happened is judged by expectNoEarlyRelease.
 */
async function deleteLeaderWhile(meddle: (leader: V1Pod, deletedAt: number) => Promise<number | void>): Promise<Deletion> {
  const leader = await settledSampleLeader(http);
  const name = leader.metadata?.name ?? '';
  const recorder = new LeaseRecorder(http, NS, new Set(leases), log);
  await recorder.start();
  try {
    await http.request('DELETE', podPath(leader));
    const deletedAt = Date.now();
    const meddledAt = (await meddle(leader, deletedAt)) ?? Date.now();
    const after = await waitFor('a new pod', 120_000, async () => {
      const pods = await waitRolloutComplete(http, NS, SAMPLE_DEPLOYMENT, 120_000);
      return pods.some((p) => p.metadata?.name === name) ? undefined : pods;
    });
    await recorder.waitSeenHeldBy(after, 120_000);
    return { name, deletedAt, meddledAt, observations: recorder.observations };
  } finally {
    recorder.stop();
  }
}

/** Every lease changed holder only after the old leader's process that held it exited (the node's own record). */
async function expectNoEarlyRelease({ name, deletedAt, meddledAt, observations }: Deletion): Promise<void> {
  // The preStop held the old attacher: the case tried everything while it still ran and renewed.
  const attacherExit = await exitOf(name, 'csi-attacher');
  expect(attacherExit - deletedAt).toBeGreaterThan((PRESTOP_S - 3) * 1000);
  expect(meddledAt, "the case's attempts made before the old attacher's exit").toBeLessThan(attacherExit);
  // Each sidecar holds its own lease; the operator's release waits for every container of the pod, a sidecar's
  // own release on exit for itself.
  for (const [container, lease] of Object.entries(SAMPLE_LEASES)) {
    const exitedAt = await exitOf(name, container);
    const moved = observations.find((o) => o.lease === lease && o.t > deletedAt && o.holder !== name);
    expect(moved, `${lease} changed holder`).toBeDefined();
    expect(moved?.t ?? 0, `${lease} left ${name} only after its ${container} exited (${(moved?.t ?? 0) - exitedAt} ms after)`).toBeGreaterThanOrEqual(exitedAt);
  }
}

/**
 * The policy's answer changes when its binding is touched as well as on the operator's periodic check (a minute,
 * unit-tested); a touch makes the operator ask the API server's authorizer again now rather than within a minute.
 */
async function recheckNow(): Promise<void> {
  await kubectl('annotate', '--overwrite', 'validatingadmissionpolicybinding', 'csi-handover-witness', `csi-handover.io/test-recheck=${Date.now()}`);
}

beforeAll(async () => {
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  // At the CR's level before the preStop goes in: no pod that has it is replaced on the way (18 s each).
  await sampleAt(http, 'upstream-1replica', 'Debug');
  // The attacher keeps running, renewing its Lease, for PRESTOP_S (18 s) after its pod is deleted.
  await http.patch(
    `/apis/apps/v1/namespaces/${NS}/deployments/${SAMPLE_DEPLOYMENT}`,
    { spec: { template: { spec: { containers: [{ name: 'csi-attacher', lifecycle: { preStop: { sleep: { seconds: PRESTOP_S } } } }] } } } },
    PatchType.strategic,
  );
  await installWitness(http);
  await waitFor('the witness policy in force', 90_000, async () => (await inForce()) === 1, 500);
  await settledSampleLeader(http);
}, 600_000);

afterAll(async () => {
  await kubectl('apply', '-f', 'config/witness/admission_policy.yaml').catch(() => undefined);
  await kubectl('apply', '-f', 'config/witness/rbac.yaml').catch(() => undefined);
  await kubectl('delete', 'namespace', OTHER_NS, '--ignore-not-found', '--wait=false').catch(() => undefined);
  await kubectl('-n', NS, 'delete', 'serviceaccount,role,rolebinding', FORGER, '--ignore-not-found').catch(() => undefined);
  // The sample without the preStop, for the files after this one (an apply of the overlay keeps a field it never set).
  await http
    .patch(
      `/apis/apps/v1/namespaces/${NS}/deployments/${SAMPLE_DEPLOYMENT}`,
      { spec: { template: { spec: { containers: [{ name: 'csi-attacher', lifecycle: null }] } } } },
      PatchType.strategic,
    )
    .catch(() => undefined);
  await settledSampleLeader(http).catch(() => undefined);
});

describe('while the leader renews through its preStop, with the policy in force', () => {
  // One deletion for three attempts: a forger's condition, the real witness's token with impossible times, then a
  // flood of junk reports until past the old attacher's exit. Each `it` judges its own part; the last, the leases.
  let deletion: Deletion;
  const forged: string[] = [];
  const impossible = { far: '', early: '', condition: '', refused: false };
  const flood = { sent: 0, namingTheWitness: 0, answers: new Map<string, number>() };
  const before = { reports: 0, early: 0, conditions: 0, reviews: 0, witnessed: 0 };
  const reviews = () => operatorMetric(http, 'csi_handover_api_requests_total{caller="controllers",verb="POST",resource="tokenreviews",code="201"}');
  const witnessed = () => operatorMetric(http, 'csi_handover_release_evidence_total{evidence="witness-saw-containers-exit"}');

  /** A ServiceAccount that may patch pods/status writes the condition, dated in 2099 or just after the deletion. */
  async function forge(leader: V1Pod, deletedAt: number): Promise<void> {
    const forger = clientWithToken(await forgerToken());
    for (const exitedBy of [Date.parse('2099-01-01T00:00:00Z'), deletedAt + 1_000])
      forged.push(await answer(forger.patch(`${podPath(leader)}/status`, evidence(leader.spec?.nodeName ?? '', exitedBy), PatchType.strategic)));
  }

  /** The real witness's token: reports dated in 2099 and before the deletion, and the 2099 time as a condition. */
  async function impossibleTimes(leader: V1Pod, deletedAt: number): Promise<void> {
    const node = leader.spec?.nodeName ?? '';
    const report = (exitedBy: number) => ({
      namespace: NS,
      name: leader.metadata?.name,
      uid: leader.metadata?.uid,
      node,
      exitedBy: new Date(exitedBy).toISOString(),
      detail: 'test',
    });
    const token = await witnessToken(http, node, WITNESS_AUDIENCE);
    // Until the operator has seen the deletion, a report is refused for that; then for its time.
    impossible.far = await waitFor('the report answered for its time', 10_000, async () => {
      const a = await sendWitnessReport(http, token, report(Date.parse('2099-01-01T00:00:00Z')));
      return /no graceful deletion/.test(a) ? undefined : a;
    }).catch((err: unknown) => String(err));
    impossible.early = await sendWitnessReport(http, token, report(deletedAt - 60_000));
    // With the witness's own token for the API server the policy lets it write; the operator must not take it.
    const asWitness = clientWithToken(await witnessToken(http, node));
    impossible.condition = await answer(asWitness.patch(`${podPath(leader)}/status`, evidence(node, Date.parse('2099-01-01T00:00:00Z')), PatchType.strategic));
    impossible.refused = await cameTrue(
      'the operator to refuse the condition',
      10_000,
      async () => (await rejected('condition', 'dated-after-receipt')) > before.conditions,
    );
  }

  /**
   * Until past the old attacher's exit (its preStop), waves of distinct unsigned tokens with the witness's audience
   * and subject: most name no witness pod, a fifth name the real witness of the leader's node (which the checks
   * before the review cannot tell apart).
   */
  async function junk(leader: V1Pod): Promise<void> {
    const node = leader.spec?.nodeName ?? '';
    const witness = (await witnessPods(http)).find((p) => p.spec?.nodeName === node);
    const token = (i: number, pod: { name?: string; uid?: string }) => {
      const claims = {
        aud: [WITNESS_AUDIENCE],
        sub: `system:serviceaccount:${WITNESS_NAMESPACE}:csi-handover-witness`,
        exp: Math.floor(Date.now() / 1000) + 600,
        jti: `junk-${i}`,
        'kubernetes.io': { namespace: WITNESS_NAMESPACE, pod, node: { name: node } },
      };
      return `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.x`;
    };
    const body = { namespace: NS, name: leader.metadata?.name, uid: leader.metadata?.uid, node, exitedBy: new Date().toISOString(), detail: 'junk' };
    const until = Date.now() + (PRESTOP_S + 3) * 1000;
    while (Date.now() < until) {
      const wave = Array.from({ length: 50 }, (_, i) => {
        const n = flood.sent + i;
        const real = n % 5 === 0;
        if (real) flood.namingTheWitness++;
        const pod = real ? { name: witness?.metadata?.name, uid: witness?.metadata?.uid } : { name: `nobody-${n}`, uid: `uid-${n}` };
        return sendWitnessReport(http, token(n, pod), body).then((a) => a.slice(0, 3));
      });
      flood.sent += wave.length;
      for (const a of await Promise.all(wave)) flood.answers.set(a, (flood.answers.get(a) ?? 0) + 1);
    }
  }

  beforeAll(async () => {
    Object.assign(before, {
      reports: await rejected('report', 'dated-after-receipt'),
      early: await rejected('report', 'dated-before-deletion'),
      conditions: await rejected('condition', 'dated-after-receipt'),
      reviews: await reviews(),
      witnessed: await witnessed(),
    });
    deletion = await deleteLeaderWhile(async (leader, deletedAt) => {
      // The flood last: while it runs, a report naming the real witness waits its turn for a review (429), the
      // test's own as any other.
      // One after the other: a forger's write of the very condition the real witness's token has just written
      // would change nothing, and the policy lets an unchanged condition through.
      await forge(leader, deletedAt);
      await impossibleTimes(leader, deletedAt);
      const meddledAt = Date.now();
      await junk(leader);
      return meddledAt;
    });
    console.log(`junk: ${flood.sent} sent (${flood.namingTheWitness} naming the real witness), answers ${JSON.stringify(Object.fromEntries(flood.answers))}`);
  }, 300_000);

  it('a ServiceAccount that may patch pods/status: the API server refuses its condition, dated in 2099 or just after the deletion', () => {
    expect(forged).toHaveLength(2);
    for (const a of forged) expect(a).toMatch(/^403: .*only the node witness writes csi-handover.io\/containers-exited/);
  });

  it("the real witness's token with a time in 2099 or before the deletion: answered 409 or written, never taken", async () => {
    expect(impossible.far).toMatch(/^409: .*after it arrived/);
    expect(impossible.early).toMatch(/^409: .*before the deletion was asked for/);
    expect(impossible.condition).toBe('written');
    expect(impossible.refused, 'the operator refused the condition').toBe(true);
    expect(await rejected('report', 'dated-after-receipt')).toBeGreaterThan(before.reports);
    expect(await rejected('report', 'dated-before-deletion')).toBeGreaterThan(before.early);
    expect(await rejected('condition', 'dated-after-receipt')).toBeGreaterThan(before.conditions);
  });

  it('a flood of junk tokens: none accepted, and junk costs at most one review per token naming a real witness', async () => {
    expect(flood.sent).toBeGreaterThan(0);
    expect(flood.answers.get('202')).toBeUndefined();
    // Tokens naming the real witness arrive ten at a time: all but one wait their turn (one review per witness pod).
    expect(flood.answers.get('429') ?? 0).toBeGreaterThan(0);
    // Junk naming no witness pod costs no review; junk naming one costs at most one review each, one at a time.
    // (+4: the real witness's own reports of this deletion and the test's two impossible ones.)
    expect((await reviews()) - before.reviews).toBeLessThanOrEqual(flood.namingTheWitness + 4);
  });

  it("no lease left the old leader before its holder exited, and they moved on the witness's evidence", async () => {
    await expectNoEarlyRelease(deletion);
    expect((await witnessed()) - before.witnessed).toBeGreaterThan(0);
  });
});

describe('the condition written by a pod that is not the witness, with the policy out of force', () => {
  it('no policy installed: the condition is written, and the operator does not take it', async () => {
    const forger = clientWithToken(await forgerToken());
    await kubectl('delete', 'validatingadmissionpolicybinding,validatingadmissionpolicy', 'csi-handover-witness');
    await waitFor('the operator to see the policy gone', 30_000, async () => (await inForce()) === 0, 200);
    // The API server drops a deleted policy a moment later: until then it still refuses (a dry run tells).
    const probe = await settledSampleLeader(http);
    await waitFor('the API server to stop enforcing the policy', 30_000, async () =>
      forger.patch(`${podPath(probe)}/status`, evidence(probe.spec?.nodeName ?? '', Date.now()), PatchType.strategic, { dryRun: 'All' }).then(
        () => true,
        () => false,
      ),
    );
    const before = await rejected('condition', 'policy-not-in-force');
    let written = '';
    let refused = false;
    try {
      const deletion = await deleteLeaderWhile(async (leader, deletedAt) => {
        written = await answer(forger.patch(`${podPath(leader)}/status`, evidence(leader.spec?.nodeName ?? '', deletedAt + 1_000), PatchType.strategic));
        refused = await cameTrue('the operator to refuse the condition', 10_000, async () => (await rejected('condition', 'policy-not-in-force')) > before);
      });
      expect(written).toBe('written');
      await expectNoEarlyRelease(deletion);
      expect(refused, 'the operator refused the condition').toBe(true);
    } finally {
      await kubectl('apply', '-f', 'config/witness/admission_policy.yaml');
      await waitFor('the policy in force again', 90_000, async () => (await inForce()) === 1, 500);
    }
  });

  it("the grant bound for another namespace's witness: that namespace's pod writes the condition, and the operator does not take it", async () => {
    // As if config/witness had been installed for a witness in another namespace: the grant to attest names it.
    await kubectl('create', 'namespace', OTHER_NS).catch(() => undefined);
    await kubectl('-n', OTHER_NS, 'create', 'serviceaccount', 'csi-handover-witness').catch(() => undefined);
    await http.patch(GRANT, { subjects: [{ kind: 'ServiceAccount', name: 'csi-handover-witness', namespace: OTHER_NS }] }, PatchType.merge);
    await recheckNow();
    await waitFor('the operator to see the grant elsewhere', 90_000, async () => (await inForce()) === 0, 500);
    const before = await rejected('condition', 'policy-not-in-force');
    let written = '';
    let refused = false;
    try {
      const deletion = await deleteLeaderWhile(async (leader, deletedAt) => {
        const node = leader.spec?.nodeName ?? '';
        await http.request('POST', `/api/v1/namespaces/${OTHER_NS}/pods`, {
          body: {
            metadata: { name: 'elsewhere' },
            spec: { nodeName: node, serviceAccountName: 'csi-handover-witness', containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10.2' }] },
          },
        });
        const other = clientWithToken(await podBoundToken(OTHER_NS, 'csi-handover-witness', 'elsewhere'));
        written = await answer(other.patch(`${podPath(leader)}/status`, evidence(node, deletedAt + 1_000), PatchType.strategic));
        refused = await cameTrue('the operator to refuse the condition', 10_000, async () => (await rejected('condition', 'policy-not-in-force')) > before);
      });
      expect(written).toBe('written');
      await expectNoEarlyRelease(deletion);
      expect(refused, 'the operator refused the condition').toBe(true);
    } finally {
      await kubectl('apply', '-f', 'config/witness/rbac.yaml');
      await recheckNow();
      await waitFor('the policy in force again', 120_000, async () => (await inForce()) === 1, 500);
    }
  });
});
