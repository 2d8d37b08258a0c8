// The handover engine's event routing: which reconcile keys an observed change leads to. The indexes must
// find exactly what a scan of every lease and pod would, and no more.
import type { V1Deployment, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { HandoverController } from '../../src/controller/handover/controller.js';
import type { HandoverKey } from '../../src/controller/handover/deps.js';
import { HandoverReports } from '../../src/handover/report.js';
import type { EventRecorder } from '../../src/kube/events.js';
import type { KubeHttp } from '../../src/kube/http.js';
import type { Metrics } from '../../src/metrics.js';
import { FakeInformer } from './fake-informer.js';

const lease = (ns: string, name: string, holderIdentity: string): V1Lease => ({
  metadata: { namespace: ns, name, resourceVersion: holderIdentity },
  spec: { holderIdentity },
});
const pod = (ns: string, name: string, node: string, app = 'ctrl'): V1Pod => ({
  metadata: { namespace: ns, name, uid: `${ns}-${name}`, labels: { app } },
  spec: { nodeName: node, containers: [{ name: 'c' }] },
});
const node = (name: string, ready: string): V1Node => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status: ready }] } });
const deployment = (ns: string): V1Deployment => ({
  metadata: { namespace: ns, name: 'ctrl' },
  spec: { selector: { matchLabels: { app: 'ctrl' } }, template: {} },
});
/** A workload in namespace c whose sidecar keeps its lease in namespace leases. */
const electingElsewhere: V1Deployment = {
  metadata: { namespace: 'c', name: 'ctrl' },
  spec: { selector: { matchLabels: { app: 'ctrl' } }, template: { spec: { containers: [{ name: 's', args: ['--leader-election-namespace=leases'] }] } } },
};

function setup() {
  const leases = new FakeInformer<V1Lease>();
  const pods = new FakeInformer<V1Pod>();
  const nodes = new FakeInformer<V1Node>();
  nodes.put(node('n1', 'True'));
  nodes.put(node('n2', 'True'));
  const c = new HandoverController({
    http: {} as KubeHttp,
    metrics: {} as Metrics,
    events: {} as EventRecorder,
    log: pino({ level: 'silent' }),
    leases,
    pods,
    nodes,
    deployments: () => [deployment('a'), deployment('b'), electingElsewhere],
    gateTimeoutMs: 60_000,
    earlyStart: false,
    witnessedNodes: () => new Set(),
    witnessConditionTrust: () => ({ trusted: true }),
    witnessClockSkewMs: 1_000,
    reports: new HandoverReports(() => undefined),
    onReportChanged: () => undefined,
    now: () => 0,
  });
  vi.spyOn(c.queue, 'start').mockImplementation(() => undefined);
  const added = vi.spyOn(c.queue, 'add').mockImplementation(() => undefined);
  c.start();
  const keys = (): string[] => {
    const k = [...new Set(added.mock.calls.map(([key]: [HandoverKey]) => `${key.kind}/${key.namespace}/${key.name}`))].sort();
    added.mockClear();
    return k;
  };
  keys();
  return { leases, pods, nodes, keys };
}

describe('HandoverController routing', () => {
  it('a pod change reaches the leases it holds (plain and client-go identities), in its namespace only, and its workload', () => {
    const { leases, pods, keys } = setup();
    leases.put(lease('a', 'provisioner', 'ctrl-1'));
    leases.put(lease('a', 'attacher', 'ctrl-1_8c1f'));
    leases.put(lease('a', 'resizer', 'ctrl-10'));
    leases.put(lease('b', 'provisioner', 'ctrl-1'));
    keys();
    pods.put(pod('a', 'ctrl-1', 'n1'));
    expect(keys()).toEqual(['lease/a/attacher', 'lease/a/provisioner', 'workload/a/ctrl']);
  });

  it('follows leases as they change hands and disappear', () => {
    const { leases, pods, keys } = setup();
    leases.put(lease('a', 'provisioner', 'ctrl-1'));
    leases.put(lease('a', 'provisioner', 'ctrl-2'));
    keys();
    pods.put(pod('a', 'ctrl-1', 'n1'));
    expect(keys()).toEqual(['workload/a/ctrl']);
    pods.put(pod('a', 'ctrl-2', 'n1'));
    expect(keys()).toEqual(['lease/a/provisioner', 'workload/a/ctrl']);
    leases.remove(lease('a', 'provisioner', 'ctrl-2'));
    pods.put({ ...pod('a', 'ctrl-2', 'n1'), status: { phase: 'Running' } });
    expect(keys()).toEqual(['workload/a/ctrl']);
  });

  it('a deleted pod (tombstone) still reaches its leases', () => {
    const { leases, pods, keys } = setup();
    leases.put(lease('a', 'provisioner', 'ctrl-1'));
    pods.put(pod('a', 'ctrl-1', 'n1'));
    keys();
    pods.remove(pod('a', 'ctrl-1', 'n1'));
    expect(keys()).toEqual(['lease/a/provisioner', 'workload/a/ctrl']);
  });

  it('a node change reaches the pods on that node only, and their leases', () => {
    const { leases, pods, nodes, keys } = setup();
    leases.put(lease('a', 'provisioner', 'ctrl-1'));
    leases.put(lease('b', 'provisioner', 'ctrl-2'));
    pods.put(pod('a', 'ctrl-1', 'n1'));
    pods.put(pod('b', 'ctrl-2', 'n2'));
    keys();
    nodes.put(node('n1', 'False'));
    expect(keys()).toEqual(['lease/a/provisioner', 'workload/a/ctrl']);
  });

  it('a new holder of a lease re-checks its workload (deletion cost); a renewal does not', () => {
    const { leases, pods, keys } = setup();
    pods.put(pod('a', 'ctrl-1', 'n1'));
    pods.put(pod('a', 'other', 'n1', 'unmanaged'));
    keys();
    leases.put(lease('a', 'provisioner', 'ctrl-1'));
    expect(keys()).toEqual(['lease/a/provisioner', 'workload/a/ctrl']);
    leases.put({ ...lease('a', 'provisioner', 'ctrl-1'), metadata: { namespace: 'a', name: 'provisioner', resourceVersion: 'renewed' } });
    expect(keys()).toEqual(['lease/a/provisioner']);
    leases.put(lease('a', 'provisioner', 'other')); // a pod of no managed workload
    expect(keys()).toEqual(['lease/a/provisioner']);
  });

  it('a hostNetwork pod reaches the leases held under its node’s name', () => {
    const { leases, pods, keys } = setup();
    leases.put(lease('a', 'provisioner', 'n1'));
    leases.put(lease('a', 'attacher', 'n2'));
    keys();
    const p = pod('a', 'ctrl-1', 'n1');
    pods.put({ ...p, spec: { ...p.spec, containers: p.spec?.containers ?? [], hostNetwork: true } });
    expect(keys()).toEqual(['lease/a/provisioner', 'workload/a/ctrl']);
  });

  it('a pod reaches the leases its workload keeps in another namespace (--leader-election-namespace)', () => {
    const { leases, pods, keys } = setup();
    leases.put(lease('leases', 'provisioner', 'ctrl-1'));
    leases.put(lease('c', 'provisioner', 'ctrl-1'));
    keys();
    pods.put(pod('c', 'ctrl-1', 'n1'));
    expect(keys()).toEqual(['lease/c/provisioner', 'lease/leases/provisioner', 'workload/c/ctrl']);
  });
});
