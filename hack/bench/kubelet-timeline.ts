// make bench-kubelet: what a real kubelet reports, and when, for the two moments the handover engine decides on.
// Per run, a two-container pod (each container exits 200 ms after SIGTERM) is created on a real node and then
// deleted once it has run for DELETE_AFTER_MS (default 3000: a pod that has been up for a while; a pod deleted
// while its kubelet is still finishing the start waits for that first); times are taken on arrival from an API
// watch and from the node's own record (the kubelet's stop and containerd's exits), relative to the create and
// to the delete request:
//   create → Running (every container running)
//   delete → deletionTimestamp seen → kubelet stops the containers → processes exit → the status update with
//   every container terminated (its phase) → the object DELETED.
// BENCH_RUNS repetitions (default 5). Output: a table on stdout and .local/bench/kubelet-timeline.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { clusterHttp, localDir, nodeEvents, recordWatch, waitFor } from '../lib/cluster.js';

const http = clusterHttp();
const NS = 'default';
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const DELETE_AFTER_MS = Number(process.env.DELETE_AFTER_MS ?? 3000);

interface Run {
  node: string;
  runningMs: number;
  deletionSeenMs: number;
  stopMs: number;
  lastExitMs: number;
  terminalStatusMs: number;
  terminalPhase: string;
  statusUpdatesWhileTerminating: number;
  /** Updates with some but not all containers terminated: none if the kubelet reports the exits at once. */
  partialUpdates: number;
  deletedMs: number;
}

async function once(i: number): Promise<Run> {
  const name = `kubelet-timeline-${Date.now()}-${i}`;
  const node = i % 2 === 0 ? 'node-1' : 'node-2';
  const script = 'trap "sleep 0.2; exit 0" TERM; while :; do sleep 0.05; done';
  const watch = await recordWatch<V1Pod>(http, `/api/v1/namespaces/${NS}/pods`, { fieldSelector: `metadata.name=${name}` });
  const seen = watch.seen;
  try {
    const created = Date.now();
    await http.request('POST', `/api/v1/namespaces/${NS}/pods`, {
      body: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name },
        spec: {
          nodeName: node,
          terminationGracePeriodSeconds: 10,
          containers: ['a', 'b'].map((c) => ({ name: c, image: 'csi-handover.local/shell:v1', command: ['sh', '-c', script] })),
        },
      },
    });
    const running = await waitFor(`${name} running`, 60_000, () =>
      seen.find((e) => e.obj.status?.containerStatuses?.length === 2 && e.obj.status.containerStatuses.every((c) => c.state?.running)),
    );
    await new Promise((r) => setTimeout(r, DELETE_AFTER_MS));
    const deleted = Date.now();
    await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${name}`);
    const gone = await waitFor(`${name} DELETED`, 60_000, () => seen.find((e) => e.type === 'DELETED'));
    const uid = running.obj.metadata?.uid;
    const record = await waitFor('the node record of both exits', 10_000, async () => {
      const mine = (await nodeEvents()).filter((e) => e.uid === uid);
      return mine.filter((e) => e.event === 'container-exited').length === 2 ? mine : undefined;
    });
    const terminating = seen.filter((e) => e.type === 'MODIFIED' && e.obj.metadata?.deletionTimestamp);
    const terminal = terminating.find((e) => e.obj.status?.containerStatuses?.every((c) => c.state?.terminated));
    const at = (t: string | undefined) => Date.parse(t ?? '') - deleted;
    return {
      node,
      runningMs: running.t - created,
      deletionSeenMs: (terminating[0]?.t ?? NaN) - deleted,
      stopMs: Math.min(...record.filter((e) => e.event === 'signal').map((e) => at(e.t))),
      lastExitMs: Math.max(...record.filter((e) => e.event === 'container-exited').map((e) => at(e.t))),
      terminalStatusMs: (terminal?.t ?? NaN) - deleted,
      terminalPhase: terminal?.obj.status?.phase ?? '(none)',
      statusUpdatesWhileTerminating: terminating.length,
      partialUpdates: terminating.filter((e) => {
        const n = e.obj.status?.containerStatuses?.filter((c) => c.state?.terminated).length ?? 0;
        return n > 0 && n < 2;
      }).length,
      deletedMs: gone.t - deleted,
    };
  } finally {
    watch.stop();
  }
}

async function main(): Promise<void> {
  const runs: Run[] = [];
  for (let i = 0; i < RUNS; i++) runs.push(await once(i));
  const ms = (v: number) => (Number.isFinite(v) ? `${Math.round(v)}`.padStart(6) : '     -');
  console.log(`Real kubelet, graceful deletion of a 2-container pod (each exits 200 ms after SIGTERM), deleted ${DELETE_AFTER_MS} ms after it runs; ms:`);
  console.log('  node    create→Running | delete→ deletionTs   stop  last exit  terminal status  phase      updates partial  DELETED');
  for (const r of runs) {
    console.log(
      `  ${r.node}  ${ms(r.runningMs)}        |           ${ms(r.deletionSeenMs)} ${ms(r.stopMs)}     ${ms(r.lastExitMs)}           ${ms(r.terminalStatusMs)}  ${r.terminalPhase.padEnd(10)} ${String(r.statusUpdatesWhileTerminating).padStart(7)} ${String(r.partialUpdates).padStart(7)}   ${ms(r.deletedMs)}`,
    );
  }
  const dir = join(localDir, 'bench');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'kubelet-timeline.json'), JSON.stringify(runs, null, 2));
}

await main();
