// Who may speak for a pod's death, and within which bounds: the witness's evidence judged at intake
// (judgeEvidence), its condition taken only while its admission policy is in force as shipped (witnessPolicyTrust),
// and the world that applies both to a condition seen on a pod and to a report sent straight to the operator.
import type { V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { Logger } from 'pino';
import { parseAllDocuments } from 'yaml';
import { ObservedWorld } from '../../src/controller/handover/world.js';
import { WITNESS_POLICY_FIRST_CHECK_WAIT_MS, WITNESS_POLICY_RECHECK_MS, WitnessPolicyWatch } from '../../src/controller/witness-policy.js';
import { witnessOf } from '../../src/handover/observed-pod.js';
import { type EvidenceContext, judgeEvidence, witnessCondition } from '../../src/handover/witness-evidence.js';
import { type BindingObject, type PolicyObject, policyDigest, SHIPPED_POLICY_DIGEST, witnessPolicyTrust } from '../../src/handover/witness-policy.js';
import type { EventRecorder } from '../../src/kube/events.js';
import type { KubeHttp } from '../../src/kube/http.js';
import type { Informer } from '../../src/kube/informer.js';
import { makeLogger } from '../../src/log.js';
import type { Metrics } from '../../src/metrics.js';
import { FakeInformer } from './fake-informer.js';

const T = Date.parse('2026-12-05T10:00:00Z'); // the deletion was asked for
const GRACE_S = 30;
const ctx = (over: Partial<EvidenceContext> = {}): EvidenceContext => ({
  receivedAt: T + 2_000,
  clockSkewMs: 1_000,
  witnessedNodes: new Set(['n1']),
  conditionTrust: { trusted: true },
  ...over,
});
const onN1 = { nodeName: 'n1', deletionRequestedAt: T };
const verdict = (v: ReturnType<typeof judgeEvidence>) => (v.accepted ? 'accepted' : v.reason);

describe('judgeEvidence', () => {
  it.each<[string, number, 'condition' | 'report', Partial<typeof onN1> | undefined, Partial<EvidenceContext>, string]>([
    ['an exit between the deletion and its arrival', T + 1_500, 'report', undefined, {}, 'accepted'],
    ['the same, as a condition with the policy in force', T + 1_500, 'condition', undefined, {}, 'accepted'],
    [
      'a condition while the policy is not in force',
      T + 1_500,
      'condition',
      undefined,
      { conditionTrust: { trusted: false, why: 'no policy' } },
      'policy-not-in-force',
    ],
    [
      'a report while the policy is not in force: authenticated by its token',
      T + 1_500,
      'report',
      undefined,
      { conditionTrust: { trusted: false, why: 'x' } },
      'accepted',
    ],
    ['dated 2099', Date.parse('2099-01-01T00:00:00Z'), 'report', undefined, {}, 'dated-after-receipt'],
    ['dated 2099, as a condition', Date.parse('2099-01-01T00:00:00Z'), 'condition', undefined, {}, 'dated-after-receipt'],
    ['dated after its arrival, beyond the skew', T + 3_001, 'report', undefined, {}, 'dated-after-receipt'],
    ['dated after its arrival, within the skew', T + 2_900, 'report', undefined, {}, 'accepted'],
    ['dated before the deletion was asked for, beyond the skew', T - 1_001, 'report', undefined, {}, 'dated-before-deletion'],
    ['dated before the deletion, within the skew', T - 900, 'report', undefined, {}, 'accepted'],
    ['a pod never seen in a graceful deletion', T + 1_500, 'report', { deletionRequestedAt: undefined }, {}, 'not-gracefully-deleted'],
    ['a pod on another node', T + 1_500, 'report', { nodeName: 'n2' }, {}, 'another-node'],
    ['no Ready witness on the node', T + 1_500, 'report', undefined, { witnessedNodes: new Set(['n2']) }, 'no-witness-on-node'],
  ])('%s', (_, exitedBy, source, pod, c, want) => {
    expect(verdict(judgeEvidence({ exitedBy, node: 'n1' }, source, { ...onN1, ...pod }, ctx(c)))).toBe(want);
  });
});

const shipped = parseAllDocuments(readFileSync(join(import.meta.dirname, '../../config/witness/admission_policy.yaml'), 'utf8')).map(
  (d) => d.toJS() as { kind: string },
);
const policy = shipped.find((d) => d.kind === 'ValidatingAdmissionPolicy') as PolicyObject;
const binding = shipped.find((d) => d.kind === 'ValidatingAdmissionPolicyBinding') as BindingObject;
const W = 'system:serviceaccount:csi-handover-witness:csi-handover-witness';
const trust = (p: PolicyObject | undefined, b: BindingObject | undefined, mayAttest: boolean | undefined) => {
  const t = witnessPolicyTrust(p, b, mayAttest, W);
  return t.trusted ? 'trusted' : t.why;
};
const withSpec = <O extends { spec?: object }>(o: O, spec: object): O => ({ ...o, spec: { ...o.spec, ...spec } });

describe('witnessPolicyTrust', () => {
  it('knows the shipped policy by its digest (change SHIPPED_POLICY_DIGEST with config/witness/admission_policy.yaml)', () => {
    expect(policyDigest(policy)).toBe(SHIPPED_POLICY_DIGEST);
  });

  it('reads the API server’s defaults as the shipped policy', () => {
    const served = withSpec(policy, {
      matchConstraints: {
        ...policy.spec?.matchConstraints,
        matchPolicy: 'Equivalent',
        namespaceSelector: {},
        objectSelector: {},
        resourceRules: policy.spec?.matchConstraints?.resourceRules?.map((r) => ({ ...r, scope: '*' })),
      },
    });
    expect(trust(served, withSpec(binding, { matchResources: { namespaceSelector: {}, objectSelector: {}, matchPolicy: 'Equivalent' } }), true)).toBe(
      'trusted',
    );
  });

  it.each<[string, PolicyObject | undefined, BindingObject | undefined, boolean | undefined, RegExp]>([
    ['no policy', undefined, binding, true, /no ValidatingAdmissionPolicy/],
    ['no binding', policy, undefined, true, /no ValidatingAdmissionPolicyBinding/],
    ['a binding that only warns', policy, withSpec(binding, { validationActions: ['Warn', 'Audit'] }), true, /does not deny/],
    ['a binding of another policy', policy, withSpec(binding, { policyName: 'other' }), true, /binds other/],
    [
      'a binding narrowed to some namespaces',
      policy,
      withSpec(binding, { matchResources: { namespaceSelector: { matchLabels: { a: 'b' } } } }),
      true,
      /narrows/,
    ],
    ['an edited rule', withSpec(policy, { validations: policy.spec?.validations?.slice(1) }), binding, true, /not the one shipped/],
    ['a policy set to Ignore its failures', withSpec(policy, { failurePolicy: 'Ignore' }), binding, true, /not the one shipped/],
    [
      'a policy narrowed by an object selector',
      withSpec(policy, { matchConstraints: { ...policy.spec?.matchConstraints, objectSelector: { matchLabels: { a: 'b' } } } }),
      binding,
      true,
      /leaves some pods out/,
    ],
    ['the witness of the configured namespace may not attest (the grant is bound elsewhere)', policy, binding, false, /may not attest/],
    ['the authorizer could not be asked', policy, binding, undefined, /could not ask/],
  ])('not in force: %s', (_, p, b, mayAttest, why) => {
    expect(trust(p, b, mayAttest)).toMatch(why);
  });
});

describe('the world takes the witness’s evidence only as judged', () => {
  const node = (name: string): V1Node => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status: 'True' }] } });
  const now = T + 2_000;
  let conditionTrust: EvidenceContext['conditionTrust'] = { trusted: true };
  const world = () => {
    const nodes = new FakeInformer<V1Node>();
    nodes.put(node('n1'));
    return new ObservedWorld({
      leases: new FakeInformer<V1Lease>(),
      nodes,
      deployments: () => [],
      now: () => now,
      evidenceContext: () => ({ witnessedNodes: new Set(['n1']), conditionTrust, clockSkewMs: 1_000 }),
    });
  };
  const pod = (uid: string, exitedBy?: number): V1Pod => ({
    metadata: { name: 'ctrl', namespace: 'csi', uid, deletionTimestamp: new Date(T + GRACE_S * 1000), deletionGracePeriodSeconds: GRACE_S },
    spec: { nodeName: 'n1', containers: [{ name: 'c' }] },
    status: {
      phase: 'Running',
      containerStatuses: [{ name: 'c', image: 'i', imageID: '', ready: false, restartCount: 0, state: { running: {} } }],
      ...(exitedBy !== undefined ? { conditions: [witnessCondition({ exitedBy, node: 'n1' }, 'test', exitedBy)] } : {}),
    },
  });

  it('a condition in bounds, the policy in force: accepted, once', () => {
    const w = world();
    conditionTrust = { trusted: true };
    const first = w.podSeen(pod('u1', T + 1_500));
    expect(first.judged?.accepted).toBe(true);
    expect(witnessOf(first.observed)?.exitedBy).toBe(T + 1_500);
    // The same condition again (another status update): not judged twice.
    expect(w.podSeen(pod('u1', T + 1_500)).judged).toBeUndefined();
  });

  it('a condition while the policy is not in force, or dated 2099: refused, and stays refused', () => {
    const w = world();
    conditionTrust = { trusted: false, why: 'no policy' };
    const seen = w.podSeen(pod('u2', T + 1_500));
    expect(seen.judged).toMatchObject({ accepted: false, reason: 'policy-not-in-force' });
    expect(witnessOf(seen.observed)).toBeUndefined();
    // The policy comes later: the condition written before it is still not evidence.
    conditionTrust = { trusted: true };
    expect(witnessOf(w.podSeen(pod('u2', T + 1_500)).observed)).toBeUndefined();
    const future = w.podSeen(pod('u3', Date.parse('2099-01-01T00:00:00Z')));
    expect(future.judged).toMatchObject({ accepted: false, reason: 'dated-after-receipt' });
    expect(witnessOf(future.observed)).toBeUndefined();
  });

  it('a report: only for a pod seen in a graceful deletion on that node, in bounds, by that pod’s uid', () => {
    const w = world();
    expect(w.witnessReported('u9', { exitedBy: T + 1_000, node: 'n1' }, now)).toMatchObject({ refused: expect.stringMatching(/no pod with uid u9/) });
    const alive = pod('u4');
    delete alive.metadata?.deletionTimestamp;
    w.podSeen(alive);
    expect(w.witnessReported('u4', { exitedBy: T + 1_000, node: 'n1' }, now)).toMatchObject({ verdict: { reason: 'not-gracefully-deleted' } });
    w.podSeen(pod('u5'));
    expect(w.witnessReported('u5', { exitedBy: T - 5_000, node: 'n1' }, now)).toMatchObject({ verdict: { reason: 'dated-before-deletion' } });
    expect(w.witnessReported('u5', { exitedBy: Date.parse('2099-01-01T00:00:00Z'), node: 'n1' }, now)).toMatchObject({
      verdict: { reason: 'dated-after-receipt' },
    });
    expect(witnessOf(w.pod('u5') ?? { pod: {}, gone: false })).toBeUndefined();
    expect(w.witnessReported('u5', { exitedBy: T + 1_000, node: 'n1' }, now)).toHaveProperty('pod');
    expect(witnessOf(w.pod('u5') ?? { pod: {}, gone: false })?.exitedBy).toBe(T + 1_000);
  });

  it('the earliest deletion request stands: a second, shorter deletion does not move it', () => {
    const w = world();
    w.podSeen(pod('u6'));
    const again = pod('u6');
    if (again.metadata) {
      again.metadata.deletionTimestamp = new Date(T + 10_000);
      again.metadata.deletionGracePeriodSeconds = 1; // asked at T + 9 s
    }
    w.podSeen(again);
    expect(w.pod('u6')?.deletionRequestedAt).toBe(T);
    expect(w.witnessReported('u6', { exitedBy: T + 1_000, node: 'n1' }, now)).toHaveProperty('pod');
  });
});

describe('WitnessPolicyWatch', () => {
  class SyncedInformer<T extends PolicyObject | BindingObject> extends FakeInformer<T> {
    hasSynced(): boolean {
      return true;
    }
    waitForSync(): Promise<void> {
      return Promise.resolve();
    }
  }
  /** Lists when told to (never, for an API server without the API). */
  class LateInformer<T extends PolicyObject | BindingObject> extends FakeInformer<T> {
    private synced = false;
    private readonly waiters: (() => void)[] = [];
    hasSynced(): boolean {
      return this.synced;
    }
    waitForSync(): Promise<void> {
      return this.synced ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
    }
    sync(): void {
      this.synced = true;
      for (const w of this.waiters.splice(0)) w();
    }
  }
  const inForce = { set: vi.fn<(v: number) => void>() };
  let mayAttest = true;
  const reviews: unknown[] = [];
  const http = {
    request: (_method: string, _path: string, opts: { body: unknown }) => {
      reviews.push(opts.body);
      return Promise.resolve({ status: { allowed: mayAttest } });
    },
  } as unknown as KubeHttp;
  const policies = new SyncedInformer<PolicyObject>();
  const bindings = new SyncedInformer<BindingObject>();
  policies.put({ ...policy, metadata: { name: 'csi-handover-witness' } });
  bindings.put({ ...binding, metadata: { name: 'csi-handover-witness' } });
  const watchOver = (p: FakeInformer<PolicyObject>, b: FakeInformer<BindingObject>, warnings: string[] = []) =>
    new WitnessPolicyWatch({
      http,
      log: { ...makeLogger('test', 'silent'), warn: (_o: unknown, msg: string) => warnings.push(msg), info: () => undefined } as unknown as Logger,
      metrics: { witnessPolicyInForce: inForce } as unknown as Pick<Metrics, 'witnessPolicyInForce'>,
      events: { emit: () => Promise.resolve() } as unknown as EventRecorder,
      policies: p as unknown as Informer<PolicyObject>,
      bindings: b as unknown as Informer<BindingObject>,
      witnesses: new FakeInformer<V1Pod>(),
      witnessNamespace: 'csi-handover-witness',
      isLeader: () => true,
    });
  const watch = watchOver(policies, bindings);
  // A check awaits the review's answer: letting 1 ms pass runs what is queued.
  const settle = () => vi.advanceTimersByTimeAsync(1);

  it('asks the authorizer at start, again on a change of the binding and every recheck period, and follows its answer', async () => {
    vi.useFakeTimers();
    try {
      watch.start();
      await settle();
      expect(watch.current().trusted).toBe(true);
      expect(reviews).toHaveLength(1);
      expect(reviews[0]).toMatchObject({ spec: { user: W, resourceAttributes: { group: 'csi-handover.io', resource: 'containerexits', verb: 'attest' } } });

      // The grant moves away unseen (no informer tells): the next period's check notices.
      mayAttest = false;
      await vi.advanceTimersByTimeAsync(WITNESS_POLICY_RECHECK_MS - 2_000);
      expect(watch.current().trusted).toBe(true);
      await vi.advanceTimersByTimeAsync(2_000);
      await settle();
      expect(watch.current()).toMatchObject({ trusted: false, why: expect.stringMatching(/may not attest/) as unknown });
      expect(inForce.set).toHaveBeenLastCalledWith(0);

      // It comes back, and the binding is touched: asked again at once, not a period later.
      mayAttest = true;
      const asked = reviews.length;
      bindings.put({ ...binding, metadata: { name: 'csi-handover-witness', annotations: { touched: '1' } } });
      await settle();
      expect(reviews.length).toBeGreaterThan(asked);
      expect(watch.current().trusted).toBe(true);
      expect(inForce.set).toHaveBeenLastCalledWith(1);
    } finally {
      watch.stop();
      vi.useRealTimers();
    }
  });

  it('answers first once the policy caches have listed: a start is not told they "cannot be read"', async () => {
    vi.useFakeTimers();
    const p = new LateInformer<PolicyObject>();
    const b = new LateInformer<BindingObject>();
    p.put({ ...policy, metadata: { name: 'csi-handover-witness' } });
    b.put({ ...binding, metadata: { name: 'csi-handover-witness' } });
    const warnings: string[] = [];
    const late = watchOver(p, b, warnings);
    try {
      late.start();
      await vi.advanceTimersByTimeAsync(2_000);
      expect(late.current()).toEqual({ trusted: false, why: 'not checked yet' });
      p.sync();
      b.sync();
      await settle();
      expect(late.current().trusted).toBe(true);
      expect(warnings).toEqual([]);
    } finally {
      late.stop();
      vi.useRealTimers();
    }
  });

  it('an API server whose caches never list: "cannot be read" after the first check’s wait, not before', async () => {
    vi.useFakeTimers();
    const warnings: string[] = [];
    const never = watchOver(new LateInformer<PolicyObject>(), new LateInformer<BindingObject>(), warnings);
    try {
      never.start();
      await vi.advanceTimersByTimeAsync(WITNESS_POLICY_FIRST_CHECK_WAIT_MS - 1_000);
      expect(never.current()).toEqual({ trusted: false, why: 'not checked yet' });
      await vi.advanceTimersByTimeAsync(1_000);
      await settle();
      expect(never.current()).toMatchObject({ trusted: false, why: expect.stringMatching(/cannot be read/) as unknown });
      expect(warnings).toHaveLength(1);
    } finally {
      never.stop();
      vi.useRealTimers();
    }
  });
});
