// The local cluster is real: a v1.36.3 control plane and two real nodes (kubelet, containerd, runc, CNI,
// kube-proxy) that run pods with their own hostname, volumes and service-account token, and the nodes' own
// record of what happened to each container (hack/node-record.ts), which the other tests read.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { isNotFound } from '../../src/kube/errors.js';
import { clusterHttp, kubectl, nodeEvents, nodeRuntimes, waitFor } from '../../hack/lib/cluster.js';

const http = clusterHttp();
const ns = 'default';

function shellPod(name: string, script: string, extra: Partial<V1Pod['spec']> = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns },
    spec: {
      terminationGracePeriodSeconds: 5,
      containers: [{ name: 'sh', image: 'csi-handover.local/shell:v1', command: ['sh', '-c', script] }],
      ...extra,
    },
  };
}

const getPod = (name: string) => http.get<V1Pod>(`/api/v1/namespaces/${ns}/pods/${name}`);
const createPod = (pod: V1Pod) => http.request<V1Pod>('POST', `/api/v1/namespaces/${ns}/pods`, { body: pod });
const deletePod = (name: string, gracePeriodSeconds?: number) =>
  http.request('DELETE', `/api/v1/namespaces/${ns}/pods/${name}`, { body: gracePeriodSeconds === undefined ? {} : { gracePeriodSeconds } });
const gone = async (name: string) => {
  try {
    await getPod(name);
    return false;
  } catch (err) {
    if (isNotFound(err)) return true;
    throw err;
  }
};

afterAll(async () => {
  for (const name of ['node-basics', 'node-no-image', 'node-crash', 'node-gated']) {
    await deletePod(name, 0).catch(() => undefined);
  }
});

describe('control plane', () => {
  it('serves Kubernetes v1.36.3 and is ready', async () => {
    const version = await http.get<{ gitVersion: string }>('/version');
    expect(version.gitVersion).toBe('v1.36.3');
    expect(await http.get<string>('/readyz')).toBe('ok');
  });

  it('has two real nodes Ready', async () => {
    const nodes = await http.get<{ items: V1Node[] }>('/api/v1/nodes');
    const ready = nodes.items.filter((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
    expect(ready.map((n) => n.metadata?.name).sort()).toEqual(['node-1', 'node-2']);
  });
});

describe('real nodes', () => {
  let basicsUid = '';
  it('runs a pod with its own hostname, service account files and in-cluster env, and reports it Running', async () => {
    const script = [
      'echo "host=$(hostname)"',
      'echo "ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)"',
      'test -s /var/run/secrets/kubernetes.io/serviceaccount/token && echo token=ok',
      'echo "api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"',
      'echo ready > /data/flag && cat /data/flag',
      'trap "echo got-term; exit 0" TERM',
      'while true; do sleep 0.1; done',
    ].join('; ');
    const pod0 = shellPod('node-basics', script, { volumes: [{ name: 'data', emptyDir: {} }] });
    const c0 = pod0.spec?.containers[0];
    if (c0) c0.volumeMounts = [{ name: 'data', mountPath: '/data' }];
    await createPod(pod0);
    const pod = await waitFor('node-basics Running and Ready', 30_000, async () => {
      const p = await getPod('node-basics');
      return p.status?.phase === 'Running' && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? p : undefined;
    });
    expect(pod.status?.containerStatuses?.[0]?.state?.running).toBeDefined();
    basicsUid = pod.metadata?.uid ?? '';
    const log = await waitFor('container output', 10_000, async () => {
      const text = await kubectl('logs', '-n', ns, 'node-basics');
      return text.includes('ready') ? text : undefined;
    });
    expect(log).toContain('host=node-basics');
    expect(log).toContain('ns=default');
    expect(log).toContain('token=ok');
    expect(log).toContain('api=10.0.0.1:443'); // the kubernetes Service
  });

  it('ends a deleted pod with SIGTERM; the node records start, stop signal and exits in order', async () => {
    const log = kubectl('logs', '-n', ns, '-f', 'node-basics'); // follows until the container ends
    await deletePod('node-basics');
    await waitFor('node-basics gone', 30_000, () => gone('node-basics'));
    expect(await log).toContain('got-term');
    const events = await waitFor('the sandbox stopped', 10_000, async () => {
      const mine = (await nodeEvents()).filter((e) => e.uid === basicsUid); // this pod, not an earlier one of that name
      return mine.some((e) => e.event === 'pod-stopped') ? mine : undefined;
    });
    const order = events.map((e) => e.event + (e.signal ? `:${e.signal}` : ''));
    // The container ends on its own after SIGTERM; containerd then kills the sandbox's pause process. CRI-O runs
    // none (drop_infra_ctr): its sandbox stops with no process to kill.
    const runtime = (await nodeRuntimes(http)).get(events[0]?.node ?? '');
    const sandboxStop = runtime === 'cri-o' ? 'pod-stopped' : 'pod-stopped:SIGKILL';
    expect(order).toEqual(['pod-started', 'container-started', 'signal:SIGTERM', 'container-exited', sandboxStop]);
    expect(events.find((e) => e.event === 'container-exited')?.exitCode).toBe(0);
  });

  it('leaves a pod whose image no node has, and no registry serves, Waiting with the pull error', async () => {
    await createPod({ ...shellPod('node-no-image', ''), spec: { containers: [{ name: 'c', image: '127.0.0.1:1/nothing:v1' }] } });
    const state = await waitFor('a pull error', 60_000, async () => {
      const w = (await getPod('node-no-image')).status?.containerStatuses?.[0]?.state?.waiting;
      return w?.reason === 'ErrImagePull' || w?.reason === 'ImagePullBackOff' ? w : undefined;
    });
    expect(state.message).toContain('127.0.0.1:1/nothing:v1');
  });

  it('restarts a crashing container and counts the restarts', async () => {
    await createPod(shellPod('node-crash', 'exit 3'));
    const status = await waitFor('a restart', 60_000, async () => {
      const s = (await getPod('node-crash')).status?.containerStatuses?.[0];
      return (s?.restartCount ?? 0) >= 1 && s?.lastState?.terminated ? s : undefined;
    });
    expect(status.lastState?.terminated?.exitCode).toBe(3);
  });

  it('does not run a pod that still has scheduling gates', async () => {
    await createPod(shellPod('node-gated', 'sleep 60', { schedulingGates: [{ name: 'example.com/hold' }] }));
    const p = await waitFor('gated pod observed', 10_000, async () => {
      const pod = await getPod('node-gated');
      return pod.status?.conditions?.find((c) => c.type === 'PodScheduled') ? pod : undefined;
    });
    expect(p.spec?.nodeName).toBeUndefined();
    expect(p.status?.conditions?.find((c) => c.type === 'PodScheduled')?.reason).toBe('SchedulingGated');
  });
});
