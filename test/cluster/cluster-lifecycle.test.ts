// `hack/cluster.sh down` (make cluster-down) stops every process it started — control plane, node agent
// and every pod process, including one that ignores SIGTERM — and leaves none behind. It runs a second,
// throwaway cluster on its own ports and state directory so the shared test cluster is not disturbed.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { KubeHttp } from '../../src/kube/http.js';
import { repoRoot, waitFor } from '../../hack/lib/cluster.js';

const run = promisify(execFile);
const dir = mkdtempSync('/tmp/csi-handover-lifecycle-');
const env = {
  ...process.env,
  CSI_HANDOVER_LOCAL: dir,
  ETCD_PORT: '23379', ETCD_PEER_PORT: '23380', APISERVER_PORT: '17443',
  KCM_PORT: '21257', SCHEDULER_PORT: '21259', NODE_AGENT_PORT: '21280',
};
const script = join(repoRoot, 'hack', 'cluster.sh');

afterAll(async () => {
  await run(script, ['down'], { env }).catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
});

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

it('cluster down leaves no process of ours running', async () => {
  await run(script, ['up'], { env, maxBuffer: 16 << 20 });
  const kc = new KubeConfig();
  kc.loadFromFile(join(dir, 'kubeconfig'));
  const http = new KubeHttp(kc);
  await http.request('POST', '/api/v1/namespaces/default/pods', { body: {
    apiVersion: 'v1', kind: 'Pod', metadata: { name: 'stubborn' },
    spec: { containers: [{ name: 'sh', image: 'csi-handover.local/shell:v1', command: ['sh', '-c', 'trap "" TERM; while true; do sleep 0.1; done'] }] },
  } });
  await waitFor('stubborn pod running', 60_000, async () => {
    const p = await http.get<{ status?: { phase?: string } }>('/api/v1/namespaces/default/pods/stubborn');
    return p.status?.phase === 'Running';
  });

  const started = readdirSync(join(dir, 'pids')).map((f) => Number(readFileSync(join(dir, 'pids', f), 'utf8')));
  const events = readFileSync(join(dir, 'node-agent', 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { event: string; pid?: number });
  const podPids = events.filter((e) => e.event === 'container-started' || e.event === 'pod-started').map((e) => e.pid ?? -1);
  expect(started).toHaveLength(5); // etcd, kube-apiserver, kube-controller-manager, kube-scheduler, node-agent
  expect(podPids.length).toBeGreaterThanOrEqual(2); // the sandbox and the container
  expect([...started, ...podPids].every(alive)).toBe(true);

  // Exit status 0 means down found no leftovers to clean up after its own orderly stop.
  await run(script, ['down'], { env });
  expect([...started, ...podPids].filter(alive)).toEqual([]);
  const { stdout } = await run(script, ['pod-processes'], { env });
  expect(stdout.trim()).toBe('');
  const pgrep = await run('pgrep', ['-f', dir]).catch((e: { code?: number; stdout?: string }) => e);
  expect((pgrep as { stdout?: string }).stdout?.trim() ?? '').toBe('');
});
