// The cached forms of pods and nodes (src/handover/cached.ts) must read the same to every decision as the
// objects the API serves: each pod below, in every lifecycle stage, through every pod-level decision.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { HANDOVER_STATE } from '../../src/api/names.js';
import { nodeForCache, podForCache, readinessChanged } from '../../src/handover/cached.js';
import { witnessCondition, witnessEvidence } from '../../src/handover/witness-evidence.js';
import { DELETION_COST, deletionCostPatch } from '../../src/handover/deletion-cost.js';
import { hasHandoverGate, liftGatePatch, liftGateWhenNoHandoverPending } from '../../src/handover/gate.js';
import { podHostname, podIdentity, resolveHolder } from '../../src/handover/holder.js';
import { gracefulDeletionSeconds, isTerminating, observePod, observePodGone } from '../../src/handover/observed-pod.js';
import { containersFinishedAt, provenDead } from '../../src/handover/proven-dead.js';

const T = '2026-12-01T10:00:00Z';
const heavyContainer = (name: string) => ({
  name,
  image: `registry.example/${name}:v1`,
  args: ['--v=2', '--leader-election'],
  env: [{ name: 'X', value: 'y'.repeat(200) }],
  volumeMounts: [{ name: 'socket-dir', mountPath: '/csi' }],
  resources: { requests: { cpu: '10m', memory: '20Mi' } },
  livenessProbe: { httpGet: { path: '/healthz', port: 9808 } },
});
const running = (name: string) => ({
  name,
  image: 'i',
  imageID: 'sha256:abc',
  ready: true,
  restartCount: 0,
  containerID: 'containerd://1',
  state: { running: { startedAt: T } },
});
const terminated = (name: string, finishedAt: string) => ({
  name,
  image: 'i',
  imageID: 'x',
  ready: false,
  restartCount: 1,
  state: { terminated: { exitCode: 0, reason: 'Completed', message: 'm'.repeat(4000), startedAt: T, finishedAt, containerID: 'containerd://2' } },
});
const waiting = (name: string) => ({
  name,
  image: 'i',
  imageID: '',
  ready: false,
  restartCount: 3,
  state: { waiting: { reason: 'CrashLoopBackOff', message: 'back-off' } },
});

function pod(
  over: {
    deleting?: boolean;
    grace?: number;
    statuses?: object[];
    hostNetwork?: boolean;
    gated?: boolean;
    state?: string;
    cost?: string;
    sidecar?: boolean;
    hostname?: string;
  } = {},
): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'csi-ctrl-7d9f-abcde',
      generateName: 'csi-ctrl-7d9f-',
      namespace: 'csi',
      uid: 'u1',
      resourceVersion: '42',
      creationTimestamp: new Date(T),
      labels: { app: 'csi-ctrl', 'pod-template-hash': '7d9f' },
      annotations: {
        'kubectl.kubernetes.io/restartedAt': T,
        'some.io/large': 'z'.repeat(2000),
        ...(over.state ? { [HANDOVER_STATE]: over.state } : {}),
        ...(over.cost ? { [DELETION_COST]: over.cost } : {}),
      },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'csi-ctrl-7d9f', uid: 'rs', controller: true }],
      managedFields: [{ manager: 'kubelet', operation: 'Update' }],
      ...(over.deleting ? { deletionTimestamp: new Date(T), deletionGracePeriodSeconds: over.grace ?? 30 } : {}),
    },
    spec: {
      nodeName: 'node-1',
      hostNetwork: over.hostNetwork,
      hostname: over.hostname,
      serviceAccountName: 'csi',
      terminationGracePeriodSeconds: 30,
      schedulingGates: over.gated ? [{ name: 'other.io/gate' }, { name: 'csi-handover.io/lease-handover' }] : undefined,
      containers: ['csi-attacher', 'csi-provisioner', 'hostpath'].map(heavyContainer),
      initContainers: over.sidecar ? [{ ...heavyContainer('native-sidecar'), restartPolicy: 'Always' }, heavyContainer('init')] : undefined,
      volumes: [{ name: 'socket-dir', emptyDir: {} }],
    },
    status: {
      phase: over.deleting ? 'Succeeded' : 'Running',
      hostIP: '10.0.0.1',
      podIP: '10.244.1.5',
      conditions: [{ type: 'Ready', status: 'True' }],
      containerStatuses: (over.statuses ?? ['csi-attacher', 'csi-provisioner', 'hostpath'].map(running)) as V1Pod['status'] extends infer S
        ? S extends { containerStatuses?: infer C }
          ? C
          : never
        : never,
      initContainerStatuses: over.sidecar ? [running('native-sidecar') as never, terminated('init', T) as never] : undefined,
    },
  };
}

const node = (ready: string, heartbeat = T): V1Node => ({
  metadata: { name: 'node-1', uid: 'n1', resourceVersion: '7', labels: { a: 'b' } },
  status: {
    conditions: [
      { type: 'MemoryPressure', status: 'False' },
      { type: 'Ready', status: ready, reason: 'KubeletReady', lastHeartbeatTime: new Date(heartbeat) },
    ],
    images: [{ names: ['registry.example/big:v1'], sizeBytes: 1 }],
  },
});

/** The pod with the node witness's evidence beside the kubelet's conditions. */
function witnessed(p: V1Pod): V1Pod {
  p.status?.conditions?.push(witnessCondition({ exitedBy: Date.parse(T) + 200, node: 'node-1' }, 'test', Date.parse(T) + 250));
  return p;
}

const cases: [string, V1Pod][] = [
  ['running', pod()],
  ['running, gated, with our state and a cost', pod({ gated: true, state: 'waiting for x', cost: '100' })],
  ['hostNetwork', pod({ hostNetwork: true })],
  ['own hostname', pod({ hostname: 'my-host' })],
  ['native sidecar running', pod({ sidecar: true })],
  ['deleting, containers running', pod({ deleting: true })],
  ['deleting, containers running, the witness saw them exit', witnessed(pod({ deleting: true }))],
  [
    'deleting, all terminated',
    pod({ deleting: true, statuses: ['csi-attacher', 'csi-provisioner', 'hostpath'].map((c) => terminated(c, '2026-12-01T10:00:03Z')) }),
  ],
  ['deleting, one waiting', pod({ deleting: true, statuses: [terminated('csi-attacher', T), waiting('csi-provisioner'), terminated('hostpath', T)] })],
  ['deleting, one unreported', pod({ deleting: true, statuses: [terminated('csi-attacher', T)] })],
  ['force-deleted', pod({ deleting: true, grace: 0, statuses: ['csi-attacher', 'csi-provisioner', 'hostpath'].map((c) => terminated(c, T)) })],
];

describe('podForCache', () => {
  const nodes = new Map([['node-1', nodeForCache(node('True'))]]);
  const fullNodes = new Map([['node-1', node('True')]]);
  it.each(cases)('%s: every decision reads the same', (_name, full) => {
    const cached = podForCache(structuredClone(full));
    const both = <R>(f: (p: V1Pod) => R) => expect(f(cached)).toEqual(f(full));
    both((p) => podIdentity(p));
    both((p) => podHostname(p));
    both((p) => hasHandoverGate(p));
    both((p) => liftGatePatch(p));
    both((p) => deletionCostPatch(p, 0));
    both((p) => deletionCostPatch(p, 2));
    both((p) => containersFinishedAt(p));
    both((p) => witnessEvidence(p));
    both((p) => liftGateWhenNoHandoverPending(p, [], false, Date.parse(T) + 5000, 60_000));
    both((p) => liftGateWhenNoHandoverPending(p, ['csi/x'], true, Date.parse(T) + 5000, 60_000));
    for (const observe of [(p: V1Pod) => observePod(undefined, p), (p: V1Pod) => observePodGone(undefined, p, Date.parse(T))]) {
      expect(provenDead(observe(cached), nodes)).toEqual(provenDead(observe(full), fullNodes));
      expect(isTerminating(observe(cached))).toBe(isTerminating(observe(full)));
      expect(gracefulDeletionSeconds(observe(cached))).toBe(gracefulDeletionSeconds(observe(full)));
    }
    const identity = podIdentity(full) ?? '';
    expect(resolveHolder(identity, [observePod(undefined, cached)], nodes)).toMatchObject({
      kind: resolveHolder(identity, [observePod(undefined, full)], fullNodes).kind,
    });
  });

  it('keeps a fraction of the pod', () => {
    const full = cases[6]?.[1] as V1Pod;
    const size = (o: unknown) => JSON.stringify(o).length;
    expect(size(podForCache(full))).toBeLessThan(size(full) / 4);
    expect(podForCache(full).metadata?.annotations).toBeUndefined();
    expect(podForCache(pod({ state: 's' })).metadata?.annotations).toEqual({ [HANDOVER_STATE]: 's' });
  });
});

describe('nodeForCache', () => {
  it('keeps the name and the Ready condition only; a heartbeat is no change of readiness', () => {
    expect(nodeForCache(node('True'))).toEqual({
      metadata: { name: 'node-1', uid: 'n1', resourceVersion: '7' },
      status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady' }] },
    });
    expect(readinessChanged(nodeForCache(node('True', '2026-12-01T10:00:10Z')), nodeForCache(node('True')))).toBe(false);
    expect(readinessChanged(nodeForCache(node('Unknown')), nodeForCache(node('True')))).toBe(true);
    expect(readinessChanged(nodeForCache(node('True')), undefined)).toBe(true);
    expect(nodeForCache({ metadata: { name: 'n' } })).toEqual({ metadata: { name: 'n', uid: undefined, resourceVersion: undefined }, status: undefined });
  });
});
