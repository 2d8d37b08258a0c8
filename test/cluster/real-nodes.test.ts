// Real nodes (hack/nodes.sh): two kubelets with containerd, runc, a CNI bridge and kube-proxy, each in its own
// network, mount and UTS namespace, run pods the way any cluster does, and `cluster-down` leaves the host as
// it found it. A throwaway cluster on its own ports, state directory and addresses, beside the shared one; with
// one KWOK fake node too (make bench-scale's), whose pods must go through the stop sequence a kubelet reports.
// (A run killed outright and reclaimed by the next `up`: test/cluster/reclaim.test.ts, in make test-reliability.)
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeconfigAccess } from '../../src/kube/kubeconfig.js';
import { KubeHttp } from '../../src/kube/http.js';
import { binDir, SECOND_CLUSTER_ENV, nodeEvents, recordWatch, repoRoot, waitFor } from '../../hack/lib/cluster.js';
import { hostState, type HostState } from '../../hack/lib/host-state.js';

const run = promisify(execFile);
const dir = mkdtempSync('/tmp/csi-handover-real-');
const env: NodeJS.ProcessEnv = {
  ...process.env,
  CSI_HANDOVER_LOCAL: dir,
  ...SECOND_CLUSTER_ENV,
  CSI_HANDOVER_KWOK_NODES: '1',
};
const script = join(repoRoot, 'hack', 'cluster.sh');
const nodesScript = join(repoRoot, 'hack', 'nodes.sh');
let http: KubeHttp;
let before: HostState;

const kubectl = async (...args: string[]): Promise<string> =>
  (await run(join(binDir, 'kubectl'), args, { env: { ...env, KUBECONFIG: join(dir, 'kubeconfig') } })).stdout;

interface Pod {
  metadata: { name: string; uid?: string; deletionTimestamp?: string; resourceVersion?: string };
  spec: { nodeName?: string };
  status?: {
    phase?: string;
    podIP?: string;
    hostIP?: string;
    containerStatuses?: { name: string; containerID?: string; restartCount?: number; state?: { running?: object; terminated?: { exitCode: number } } }[];
  };
}

const SHELL = 'csi-handover.local/shell:v1';
const pod = (name: string, node: string, script: string, extra: object = {}): object => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name },
  spec: { nodeName: node, terminationGracePeriodSeconds: 10, containers: [{ name: 'sh', image: SHELL, command: ['sh', '-c', script] }], ...extra },
});

async function running(name: string): Promise<Pod> {
  return waitFor(`${name} running`, 60_000, async () => {
    const p = await http.get<Pod>(`/api/v1/namespaces/default/pods/${name}`);
    return p.status?.phase === 'Running' && p.status.containerStatuses?.every((c) => c.state?.running) ? p : undefined;
  });
}

beforeAll(async () => {
  // Resolved once: each script would otherwise check every build's key again (about 3 s a call, and the restarts
  // below call hack/nodes.sh several times).
  env.CSI_HANDOVER_BIN_DIR = (await run(join(repoRoot, 'hack', 'bins.sh'), [], { env, maxBuffer: 16 << 20 })).stdout.trim();
  before = await hostState([dir]);
  await run(script, ['up'], { env, maxBuffer: 16 << 20 });
  http = new KubeHttp(kubeconfigAccess(join(dir, 'kubeconfig')));
});

afterAll(async () => {
  await run(script, ['down'], { env }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

describe('real nodes', () => {
  it('two kubelets register Ready, node-1 on containerd and node-2 on CRI-O, each with its own address', async () => {
    const nodes = await http.get<{
      items: {
        metadata: { name: string };
        status: { nodeInfo: { kubeletVersion: string; containerRuntimeVersion: string }; addresses: { type: string; address: string }[] };
      }[];
    }>('/api/v1/nodes', { labelSelector: '!csi-handover.io/kwok' });
    expect(nodes.items.map((n) => n.metadata.name).sort()).toEqual(['node-1', 'node-2']);
    for (const n of nodes.items) expect(n.status.nodeInfo.kubeletVersion).toBe('v1.36.3');
    expect(Object.fromEntries(nodes.items.map((n) => [n.metadata.name, n.status.nodeInfo.containerRuntimeVersion]))).toEqual({
      'node-1': 'containerd://2.4.2',
      'node-2': 'cri-o://1.36.3',
    });
    const ips = nodes.items.map((n) => n.status.addresses.find((a) => a.type === 'InternalIP')?.address).sort();
    expect(ips).toEqual(['10.201.0.11', '10.201.0.12']);
  });

  it('pods get their own network namespace and IP; a hostNetwork pod shares the node’s, and its hostname is the node name', async () => {
    await http.request('POST', '/api/v1/namespaces/default/pods', { body: pod('net-a', 'node-1', 'trap "exit 0" TERM; while :; do sleep 0.2; done') });
    await http.request('POST', '/api/v1/namespaces/default/pods', { body: pod('net-b', 'node-2', 'trap "exit 0" TERM; while :; do sleep 0.2; done') });
    await http.request('POST', '/api/v1/namespaces/default/pods', {
      body: pod('host-net', 'node-2', 'trap "exit 0" TERM; while :; do sleep 0.2; done', { hostNetwork: true }),
    });
    const [a, b, h] = await Promise.all([running('net-a'), running('net-b'), running('host-net')]);
    expect(a.status?.podIP).toMatch(/^10\.245\.1\.\d+$/);
    expect(b.status?.podIP).toMatch(/^10\.245\.2\.\d+$/);
    expect(h.status?.podIP).toBe('10.201.0.12');
    expect((await kubectl('exec', 'host-net', '--', 'cat', '/proc/sys/kernel/hostname')).trim()).toBe('node-2');
    expect((await kubectl('exec', 'net-a', '--', 'cat', '/proc/sys/kernel/hostname')).trim()).toBe('net-a');
    // Across nodes, pod to pod: net-b listens, net-a connects.
    await kubectl('exec', 'net-b', '--', 'sh', '-c', 'nc -l -p 7000 -e echo hello-from-b >/dev/null 2>&1 &');
    const reply = await waitFor(
      'a TCP reply from net-b',
      20_000,
      async () => (await kubectl('exec', 'net-a', '--', 'sh', '-c', `nc -w 2 ${b.status?.podIP} 7000 </dev/null`)).trim() || undefined,
    );
    expect(reply).toBe('hello-from-b');
  });

  it('pods reach the API server through the kubernetes Service (kube-proxy)', async () => {
    const out = await kubectl('exec', 'net-a', '--', 'sh', '-c', 'nc -w 3 10.0.0.1 443 </dev/null && echo connected');
    expect(out.trim()).toBe('connected');
  });

  it('kubectl logs reads a container’s output through the kubelet', async () => {
    await http.request('POST', '/api/v1/namespaces/default/pods', {
      body: pod('logger', 'node-1', 'echo line-one; echo line-two; trap "exit 0" TERM; while :; do sleep 0.2; done'),
    });
    await running('logger');
    const logs = await waitFor('two log lines', 20_000, async () => {
      const l = await kubectl('logs', 'logger');
      return l.includes('line-two') ? l : undefined;
    });
    expect(logs.trim().split('\n')).toEqual(['line-one', 'line-two']);
  });

  it('a graceful deletion: the kubelet reports every container terminated and a terminal phase before it deletes the pod', async () => {
    await http.request('POST', '/api/v1/namespaces/default/pods', {
      body: pod('graceful', 'node-2', 'trap "sleep 0.2; exit 0" TERM; while :; do sleep 0.1; done'),
    });
    const started = await running('graceful');
    const watch = await recordWatch<Pod>(http, '/api/v1/namespaces/default/pods', {
      fieldSelector: 'metadata.name=graceful',
      resourceVersion: started.metadata.resourceVersion,
    });
    const seen = watch.seen;
    await http.request('DELETE', '/api/v1/namespaces/default/pods/graceful');
    await waitFor('graceful DELETED', 30_000, () => seen.some((e) => e.type === 'DELETED'));
    watch.stop();
    const lastBeforeDelete = seen.filter((e) => e.type === 'MODIFIED').at(-1)?.obj;
    expect(lastBeforeDelete?.metadata.deletionTimestamp).toBeDefined();
    expect(['Succeeded', 'Failed']).toContain(lastBeforeDelete?.status?.phase);
    expect(lastBeforeDelete?.status?.containerStatuses?.every((c) => c.state?.terminated)).toBe(true);
  });

  it('a KWOK fake node: its pod runs with no process; deleted, it reports every container terminated and Succeeded, then goes', async () => {
    await waitFor('kwok-node-1 Ready', 30_000, async () => {
      const n = await http.get<{ status?: { conditions?: { type: string; status: string }[] } }>('/api/v1/nodes/kwok-node-1');
      return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    });
    const fake = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'on-kwok' },
      spec: {
        nodeName: 'kwok-node-1',
        tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Exists', effect: 'NoSchedule' }],
        containers: [
          { name: 'a', image: 'csi-handover.local/virtual:v1' },
          { name: 'b', image: 'csi-handover.local/virtual:v1' },
        ],
      },
    };
    await http.request('POST', '/api/v1/namespaces/default/pods', { body: fake });
    const started = await running('on-kwok');
    const watch = await recordWatch<Pod>(http, '/api/v1/namespaces/default/pods', {
      fieldSelector: 'metadata.name=on-kwok',
      resourceVersion: started.metadata.resourceVersion,
    });
    const seen = watch.seen;
    await http.request('DELETE', '/api/v1/namespaces/default/pods/on-kwok');
    await waitFor('on-kwok DELETED', 30_000, () => seen.some((e) => e.type === 'DELETED'));
    watch.stop();
    const updates = seen.filter((e) => e.type === 'MODIFIED').map((e) => e.obj);
    // As the real kubelet (above): the terminated containers arrive in one update, with the terminal phase.
    const terminal = updates.find((p) => p.status?.containerStatuses?.some((c) => c.state?.terminated));
    expect(terminal?.metadata.deletionTimestamp).toBeDefined();
    expect(terminal?.status?.phase).toBe('Succeeded');
    expect(terminal?.status?.containerStatuses?.map((c) => c.state?.terminated?.exitCode)).toEqual([0, 0]);
    expect(updates.at(-1)?.status?.phase).toBe('Succeeded');
  });

  it('a kubelet restarted: its pods keep running in the same containers, and it runs new ones', async () => {
    const before = await running('net-a');
    await run(nodesScript, ['stop', 'node-1', 'kubelet'], { env });
    await run(nodesScript, ['start', 'node-1', 'kubelet'], { env, maxBuffer: 16 << 20 });
    await http.request('POST', '/api/v1/namespaces/default/pods', { body: pod('after-kubelet', 'node-1', 'trap "exit 0" TERM; while :; do sleep 0.2; done') });
    await running('after-kubelet');
    const after = await running('net-a');
    expect(after.status?.containerStatuses?.[0]).toMatchObject({ containerID: before.status?.containerStatuses?.[0]?.containerID, restartCount: 0 });
  });

  it.each([
    ['containerd', 'node-1', 'their shims', 'net-a'],
    ['CRI-O', 'node-2', 'conmon', 'net-b'],
  ])('%s restarted (%s): containers keep running under %s, and new pods start', async (runtime, node, _monitor, existing) => {
    const before = await running(existing);
    await run(nodesScript, ['stop', node, 'runtime'], { env });
    await run(nodesScript, ['start', node, 'runtime'], { env, maxBuffer: 16 << 20 });
    const name = `after-${runtime.toLowerCase()}`;
    await http.request('POST', '/api/v1/namespaces/default/pods', {
      body: pod(name, node, 'trap "exit 0" TERM; while :; do sleep 0.2; done'),
    });
    const fresh = await running(name);
    const after = await running(existing);
    expect(after.status?.containerStatuses?.[0]).toMatchObject({ containerID: before.status?.containerStatuses?.[0]?.containerID, restartCount: 0 });
    expect((await kubectl('exec', existing, '--', 'echo', 'still-here')).trim()).toBe('still-here');
    // The node's record follows its runtime across the restart.
    await waitFor('the new pod in the node record', 10_000, async () =>
      (await nodeEvents(dir)).some((e) => e.uid === fresh.metadata.uid && e.event === 'container-started'),
    );
  });

  it('while the nodes run, the host’s mounts, network namespaces and iptables rules are untouched', async () => {
    const during = await hostState([dir]);
    expect(during.mounts).toEqual(before.mounts);
    expect(during.netns).toEqual(before.netns);
    expect(during.iptables).toEqual(before.iptables);
    expect(during.paths).toEqual(before.paths);
  });

  it('cluster down leaves the host as it found it', async () => {
    const { stdout } = await run(nodesScript, ['processes'], { env });
    expect(stdout.trim()).not.toBe(''); // the nodes' processes, before down
    // Exit status 0 means down had nothing to kill after its orderly stop.
    await run(script, ['down'], { env });
    expect(await hostState([dir])).toEqual(before);
  });
});
