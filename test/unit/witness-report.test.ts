// The witness's report straight to the operator: who may send it (the API server's review of its token, held to a
// Ready witness pod and its node), what it may say, and that the operator keeps it for that pod only.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { observePod, observePodGone, observeWitnessEvidence, witnessOf } from '../../src/handover/observed-pod.js';
import { reportEvidence, reportSender, WITNESS_AUDIENCE, WitnessReport } from '../../src/handover/witness-report.js';
import type { TokenReviewStatus } from '../../src/kube/token-review.js';
import { replicaTargets } from '../../src/witness/report.js';

const NS = 'csi-handover-witness';
const SA = `system:serviceaccount:${NS}:csi-handover-witness`;
const ready = { conditions: [{ type: 'Ready', status: 'True' }] };
const node = (name: string, status = 'True'): V1Node => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status }] } });
const witnessPod = (uid: string, nodeName: string, over: Partial<V1Pod> = {}): V1Pod => ({
  metadata: { name: `witness-${nodeName}`, namespace: NS, uid },
  spec: { nodeName, serviceAccountName: 'csi-handover-witness', containers: [] },
  status: ready,
  ...over,
});
const review = (over: Partial<TokenReviewStatus['user']> & { authenticated?: boolean; audiences?: string[] } = {}): TokenReviewStatus => ({
  authenticated: over.authenticated ?? true,
  audiences: over.audiences ?? [WITNESS_AUDIENCE],
  user: {
    username: over.username ?? SA,
    extra: over.extra ?? { 'authentication.kubernetes.io/pod-uid': ['w1'], 'authentication.kubernetes.io/node-name': ['n1'] },
  },
});
const pods = [witnessPod('w1', 'n1'), witnessPod('w2', 'n2')];
const nodes = [node('n1'), node('n2')];
const verdict = (r: TokenReviewStatus, ps = pods, ns = nodes) => {
  const v = reportSender(r, NS, ps, ns);
  return v.ok ? `ok ${v.node}` : `${v.code} ${v.reason}`;
};

describe('reportSender', () => {
  it('accepts the token of a Ready witness pod on a Ready node, for that node', () => {
    expect(verdict(review())).toBe('ok n1');
    // An API server that adds no node claim: the witness pod's own node.
    expect(verdict(review({ extra: { 'authentication.kubernetes.io/pod-uid': ['w2'] } }))).toBe('ok n2');
  });

  it.each<[string, TokenReviewStatus, V1Pod[], V1Node[], string]>([
    ['not authenticated', { authenticated: false, error: 'expired' }, pods, nodes, '401 token not authenticated: expired'],
    ['another audience (the API server’s)', review({ audiences: ['https://kubernetes.default.svc'] }), pods, nodes, '401 token not issued'],
    [
      'another namespace’s ServiceAccount',
      review({ username: 'system:serviceaccount:default:csi-handover-witness' }),
      pods,
      nodes,
      '403 system:serviceaccount:default',
    ],
    ['a user, not a ServiceAccount', review({ username: 'admin' }), pods, nodes, '403 admin is not'],
    ['a token bound to no pod', review({ extra: {} }), pods, nodes, '403 the token is not bound to a pod'],
    ['a pod that is not a witness', review({ extra: { 'authentication.kubernetes.io/pod-uid': ['other'] } }), pods, nodes, "403 the token's pod (uid other)"],
    [
      'another ServiceAccount of the witness namespace',
      review({ username: `system:serviceaccount:${NS}:default` }),
      pods,
      nodes,
      '403 system:serviceaccount:csi-handover-witness:default is not the ServiceAccount',
    ],
    [
      'the witness pod is not Ready',
      review(),
      [witnessPod('w1', 'n1', { status: { conditions: [] } })],
      nodes,
      '403 csi-handover-witness/witness-n1 is not a Ready witness',
    ],
    [
      'the witness pod is being deleted',
      review(),
      [witnessPod('w1', 'n1', { metadata: { name: 'witness-n1', namespace: NS, uid: 'w1', deletionTimestamp: new Date() } })],
      nodes,
      '403',
    ],
    [
      'its node is not Ready',
      review(),
      pods,
      [node('n1', 'Unknown'), node('n2')],
      '403 csi-handover-witness/witness-n1 is not a Ready witness on a Ready node',
    ],
    [
      'the token names another node than the pod runs on',
      review({ extra: { 'authentication.kubernetes.io/pod-uid': ['w1'], 'authentication.kubernetes.io/node-name': ['n2'] } }),
      pods,
      nodes,
      '403 the token names node n2',
    ],
  ])('refuses %s', (_case, r, ps, ns, want) => {
    expect(verdict(r, ps, ns)).toMatch(new RegExp(`^${want.replace(/[()]/g, '\\$&')}`));
  });
});

describe('reportEvidence', () => {
  const report = WitnessReport.parse({ namespace: 'csi', name: 'ctrl-old', uid: 'u-old', node: 'n1', exitedBy: '2026-12-03T21:00:00.123456Z', detail: 'x' });

  it('carries the instant and the sender’s node', () => {
    expect(reportEvidence(report, 'n1')).toEqual({ ok: true, evidence: { exitedBy: Date.parse('2026-12-03T21:00:00.123Z'), node: 'n1' } });
  });

  it('refuses a report about another node’s pod', () => {
    expect(reportEvidence(report, 'n2')).toEqual({ ok: false, reason: 'the witness on n2 reported for node n1' });
  });

  it('reads no report without a time, a uid or a node', () => {
    expect(WitnessReport.safeParse({ ...report, exitedBy: 'soon' }).success).toBe(false);
    expect(WitnessReport.safeParse({ ...report, uid: '' }).success).toBe(false);
    expect(WitnessReport.safeParse({ ...report, node: undefined }).success).toBe(false);
  });
});

describe('a report kept on the observed pod', () => {
  const pod = (uid: string): V1Pod => ({ metadata: { name: 'ctrl-old', namespace: 'csi', uid }, spec: { nodeName: 'n1', containers: [] } });
  const evidence = { exitedBy: 1_000, node: 'n1' };

  it('outlives later versions and the deletion of the same pod, not a re-created namesake', () => {
    const reportedOn = observeWitnessEvidence(observePod(undefined, pod('u1')), evidence);
    expect(witnessOf(observePod(reportedOn, pod('u1')))).toEqual(evidence);
    expect(witnessOf(observePodGone(reportedOn, pod('u1'), 5))).toEqual(evidence);
    expect(witnessOf(observePod(reportedOn, pod('u2')))).toBeUndefined();
  });
});

describe('replicaTargets', () => {
  it('every ready address of the webhook Service’s slices, at the webhook port', () => {
    const slices = [
      {
        ports: [{ name: 'webhook', port: 9443 }],
        endpoints: [
          { addresses: ['10.0.1.5'], conditions: { ready: true } },
          { addresses: ['10.0.2.7'], conditions: { ready: false } },
          { addresses: ['10.0.2.8'] },
        ],
      },
      {
        ports: [
          { name: 'other', port: 1 },
          { name: 'more', port: 2 },
        ],
        endpoints: [{ addresses: ['10.0.3.1'] }],
      },
    ];
    expect(replicaTargets(slices)).toEqual([
      { host: '10.0.1.5', port: 9443 },
      { host: '10.0.2.8', port: 9443 },
    ]);
  });
});
