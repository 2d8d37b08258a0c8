// The faults of the reliability matrix (test/cluster/faults.test.ts) and the soak (hack/bench/soak.ts), each
// done for real to the local cluster's processes: a crash is a SIGKILL of the process the node's runtime started,
// a restart stops and starts the control plane's own process, a partition freezes a kubelet. Each fault checks
// that it took effect (a fault that silently did nothing would make a test pass for the wrong reason) and returns
// what it did, in words, for the report.
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeHttp } from '../../src/kube/http.js';
import { clusterScript, kubectl, nodeComponent, nodeEvents, setPartitioned, waitFor } from './cluster.js';
import { OPERATOR_NAMESPACE, operatorLeader, operatorPods } from './operator.js';

export const FAULTS = [
  'operator-leader-sigkill', // the operator's leader crashes (its container restarts in place)
  'operator-all-sigkill', // both replicas crash at once
  'apiserver-restart', // kube-apiserver stopped (SIGTERM) and started again
  'apiserver-outage', // kube-apiserver stopped for 20 s: longer than any renew deadline, so every leader loses its lease
  'etcd-restart', // etcd crashes (SIGKILL) and starts again
  'watch-expiry', // etcd compacted and the API server restarted: every watch resumes with 410 Gone and relists
  'kubelet-restart', // the terminating leader's kubelet is stopped (SIGKILL) for 10 s, then started
  'runtime-restart', // the terminating leader's container runtime (containerd or CRI-O) is stopped (SIGKILL) for 5 s, then started
  'partition', // the terminating leader's kubelet stops talking (SIGSTOP) for 20 s
  'force-delete', // the terminating leader's pod object is deleted with grace period 0
] as const;
export type Fault = (typeof FAULTS)[number];

/** Faults that act on the old leader's pod or node (the rest act on the operator or the control plane). */
export const POD_FAULTS: ReadonlySet<Fault> = new Set(['kubelet-restart', 'runtime-restart', 'partition', 'force-delete']);

export interface FaultTarget {
  http: KubeHttp;
  namespace: string;
  /** the driver pod that held the leases when the rollout started */
  oldLeader: V1Pod;
}

/** Longer than the operator's and the sidecars' renew deadline (10 s) and lease duration (15 s). */
export const API_OUTAGE_S = 20;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves once `pod` is terminating (its deletion has begun) or gone. */
export async function whenTerminating(http: KubeHttp, namespace: string, pod: string, timeoutMs: number): Promise<void> {
  await waitFor(
    `${pod} to terminate`,
    timeoutMs,
    async () => {
      const p = await http.get<V1Pod>(`/api/v1/namespaces/${namespace}/pods/${pod}`).catch(() => undefined);
      return !p || p.metadata?.deletionTimestamp !== undefined;
    },
    50,
  );
}

/** The host pids of a pod's running containers, from the node's own record (containerd's task starts and exits). */
export async function containerPids(namespace: string, pod: string): Promise<Map<string, number>> {
  const running = new Map<string, number>();
  for (const e of await nodeEvents()) {
    if (e.namespace !== namespace || e.pod !== pod || e.container === undefined) continue;
    if (e.event === 'container-started' && e.pid !== undefined) running.set(e.container, e.pid);
    else if (e.event === 'container-exited') running.delete(e.container);
  }
  return running;
}

/**
 * SIGKILLs every running container process of an operator pod and waits until the node saw them exit; the kubelet
 * restarts the container in place, after its crash backoff (which grows with each crash). False if none ran (the
 * pod is still in that backoff from an earlier crash).
 */
async function crashOperatorPod(pod: V1Pod): Promise<boolean> {
  const name = pod.metadata?.name ?? '';
  const pids = await containerPids(OPERATOR_NAMESPACE, name);
  if (pids.size === 0) return false;
  for (const pid of pids.values()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // exited between the record and the kill
    }
  }
  await waitFor(
    `${name}'s containers to exit`,
    30_000,
    async () => {
      const now = await containerPids(OPERATOR_NAMESPACE, name);
      return [...pids].every(([c, pid]) => now.get(c) !== pid);
    },
    100,
  );
  return true;
}

/** Current etcd revision, from etcd's own gateway. */
async function etcdRevision(): Promise<number> {
  const r = await fetch(`http://127.0.0.1:${process.env.ETCD_PORT ?? '22379'}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: 'AA==' }) });
  const body = (await r.json()) as { header?: { revision?: string } };
  const rev = Number(body.header?.revision);
  if (!Number.isFinite(rev) || rev <= 0) throw new Error(`etcd gave no revision: ${JSON.stringify(body)}`);
  return rev;
}

async function compactEtcd(): Promise<number> {
  const revision = await etcdRevision();
  const r = await fetch(`http://127.0.0.1:${process.env.ETCD_PORT ?? '22379'}/v3/kv/compaction`, {
    method: 'POST',
    body: JSON.stringify({ revision: String(revision), physical: true }),
  });
  if (!r.ok) throw new Error(`etcd compaction at ${revision}: ${r.status} ${await r.text()}`);
  return revision;
}

/** Waits until the API server answers again (after a control-plane restart). */
async function apiServerBack(http: KubeHttp): Promise<void> {
  await waitFor(
    'the API server to answer',
    120_000,
    () =>
      http.get('/readyz').then(
        () => true,
        () => false,
      ),
    250,
  );
}

/** Does `fault` to the cluster; resolves once it is over (the component back), with what was done. */
export async function inject(fault: Fault, t: FaultTarget): Promise<string> {
  const leaderName = t.oldLeader.metadata?.name ?? '';
  const node = t.oldLeader.spec?.nodeName ?? '';
  switch (fault) {
    case 'operator-leader-sigkill': {
      const leader = await operatorLeader(t.http).catch(() => undefined);
      if (!leader) return 'no operator replica leads (in crash backoff): nothing to kill';
      return (await crashOperatorPod(leader))
        ? `SIGKILLed the operator's leader ${leader.metadata?.name}`
        : `the operator's leader ${leader.metadata?.name} was not running (crash backoff)`;
    }
    case 'operator-all-sigkill': {
      const pods = (await operatorPods(t.http)).filter((p) => !p.metadata?.deletionTimestamp);
      const killed = (await Promise.all(pods.map((p) => crashOperatorPod(p)))).filter(Boolean).length;
      return `SIGKILLed all ${pods.length} operator replicas${killed < pods.length ? ` (${pods.length - killed} of them not running: crash backoff)` : ''}`;
    }
    case 'apiserver-restart':
      await clusterScript('restart', 'kube-apiserver', 'TERM');
      await apiServerBack(t.http);
      return 'restarted kube-apiserver';
    case 'apiserver-outage':
      await clusterScript('restart', 'kube-apiserver', 'TERM', String(API_OUTAGE_S));
      await apiServerBack(t.http);
      return `kube-apiserver down for ${API_OUTAGE_S} s`;
    case 'etcd-restart':
      await clusterScript('restart', 'etcd', 'KILL');
      await apiServerBack(t.http);
      return 'crashed and restarted etcd';
    case 'watch-expiry': {
      const revision = await compactEtcd();
      await clusterScript('restart', 'kube-apiserver', 'TERM');
      await apiServerBack(t.http);
      return `compacted etcd at revision ${revision} and restarted kube-apiserver`;
    }
    case 'kubelet-restart':
    case 'runtime-restart': {
      const component = fault === 'kubelet-restart' ? 'kubelet' : 'runtime';
      await nodeComponent('stop', node, component);
      try {
        await sleep(component === 'kubelet' ? 10_000 : 5_000);
      } finally {
        await nodeComponent('start', node, component);
      }
      return `${component} of ${node} down for ${component === 'kubelet' ? 10 : 5} s while ${leaderName} terminated`;
    }
    case 'partition':
      await setPartitioned(node, true);
      try {
        await sleep(20_000);
      } finally {
        await setPartitioned(node, false);
      }
      return `${node} partitioned for 20 s while ${leaderName} terminated`;
    case 'force-delete':
      await kubectl('-n', t.namespace, 'delete', 'pod', leaderName, '--grace-period=0', '--force', '--wait=false').catch((err: unknown) => {
        // Already gone: the graceful deletion finished first; nothing was forced.
        if (!String(err).includes('NotFound')) throw err;
      });
      return `force-deleted ${leaderName}`;
  }
}

/** How many times each operator pod's container has restarted (a crash or an exit), by pod name. */
export async function operatorRestarts(http: KubeHttp): Promise<Map<string, number>> {
  return new Map((await operatorPods(http)).map((p) => [p.metadata?.name ?? '', p.status?.containerStatuses?.reduce((n, c) => n + c.restartCount, 0) ?? 0]));
}

/** The operator's log since `since`, every replica's, JSON lines with a pod prefix. */
function operatorLog(since: Date): Promise<string> {
  return kubectl('-n', OPERATOR_NAMESPACE, 'logs', '-l', 'app.kubernetes.io/name=csi-handover', '--since-time', since.toISOString(), '--tail=-1', '--prefix');
}

/** Whether a replica logged a lost leadership and, after it, that it stopped its work and campaigned again, since `since`. */
export async function operatorSteppedDown(since: Date): Promise<boolean> {
  const lines = (await operatorLog(since)).split('\n');
  const lost = lines.findIndex((l) => l.includes('"lost leadership"'));
  return lost >= 0 && lines.slice(lost).some((l) => l.includes('"campaigning again"'));
}

/** Whether the operator logged that a watch expired (410 Gone) and relisted, since `since`. */
export async function operatorRelisted(since: Date): Promise<boolean> {
  return (await operatorLog(since)).includes('watch expired (410 Gone)');
}
