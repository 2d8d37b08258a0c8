// make bench-image: how fast the operator image starts on a real node. A standby replica is deleted, and its
// replacement timed: pod created (watch) → its container started (the node's own record) → serving its HTTP
// endpoints (its first log line) → Ready (watch; the readiness probe runs every 2 s). BENCH_RUNS times (default 5).
import type { V1Pod } from '@kubernetes/client-node';
import { clusterHttp, kubectl, nodeEvents, recordWatch, waitFor } from '../lib/cluster.js';
import { installOperator, OPERATOR_NAMESPACE, operatorLeader, operatorPods } from '../lib/operator.js';
import { waitRolloutComplete } from '../lib/rollout.js';
import { percentile } from './scale-stats.js';

const http = clusterHttp();
const runs = Number(process.env.BENCH_RUNS ?? 5);
const ready = (p: V1Pod) => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

interface Start {
  started: number;
  serving: number;
  ready: number;
}

async function once(): Promise<Start> {
  const before = await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
  const leader = await waitFor('a leader', 60_000, () => operatorLeader(http).catch(() => undefined));
  const standby = before.find((p) => p.metadata?.name !== leader.metadata?.name);
  if (!standby) throw new Error('no standby replica to restart (the operator runs 1 replica?)');
  const watch = await recordWatch<V1Pod>(http, `/api/v1/namespaces/${OPERATOR_NAMESPACE}/pods`, { labelSelector: 'app.kubernetes.io/name=csi-handover' });
  try {
    await http.request('DELETE', `/api/v1/namespaces/${OPERATOR_NAMESPACE}/pods/${standby.metadata?.name}`);
    const isNew = (p: V1Pod) => !before.some((b) => b.metadata?.uid === p.metadata?.uid);
    const readyAt = await waitFor('the replacement Ready', 120_000, () => watch.seen.find((e) => isNew(e.obj) && ready(e.obj)));
    const name = readyAt.obj.metadata?.name ?? '';
    const created = watch.seen.find((e) => e.type === 'ADDED' && e.obj.metadata?.name === name)?.t ?? NaN;
    const started = (await nodeEvents()).find((e) => e.pod === name && e.event === 'container-started');
    const firstLog = (await kubectl('-n', OPERATOR_NAMESPACE, 'logs', name, '--limit-bytes=4096')).split('\n')[0] ?? '';
    const servingAt = Number((JSON.parse(firstLog) as { time?: number }).time);
    return { started: Date.parse(started?.t ?? '') - created, serving: servingAt - created, ready: readyAt.t - created };
  } finally {
    watch.stop();
  }
}

await installOperator(http);
const results: Start[] = [];
for (let i = 0; i < runs; i++) {
  const r = await once();
  results.push(r);
  console.log(`run ${i + 1}: container started ${r.started} ms, serving ${r.serving} ms, Ready ${r.ready} ms after the pod was created`);
}
const line = (what: keyof Start) => {
  const v = results.map((r) => r[what]);
  return `${what.padEnd(8)} p50 ${percentile(v, 50)} ms, max ${Math.max(...v)} ms`;
};
console.log(`\nOperator image start on a real node (${runs} standby restarts; ${(await operatorPods(http)).length} replicas):`);
for (const k of ['started', 'serving', 'ready'] as const) console.log(`  ${line(k)}`);
