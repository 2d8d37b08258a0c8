// make bench-failover: the operator's own leader failover on the local cluster, graceful (the leader pod is
// deleted: SIGTERM → it stops its work, releases its Lease, the watching standby takes it) and crash (the
// leader's process is SIGKILLed: the Lease must expire). Measured from the node's own stop-signal time (or the
// kill) to the first observation of a leader again, by a Lease watch. BENCH_RUNS repetitions (default 3).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, localDir, nodeEvents, waitFor } from '../lib/cluster.js';
import { installOperator, OPERATOR_NAMESPACE, operatorLeader } from '../lib/operator.js';
import { waitRolloutComplete } from '../lib/rollout.js';
import { gapStats } from './handovers.js';
import { LeaseRecorder, sigtermTimes } from './recorder.js';

const log = makeLogger('bench-failover', process.env.LOG_LEVEL ?? 'warn');
const http = clusterHttp();
const runs = Number(process.env.BENCH_RUNS ?? 3);
const LEASE = 'csi-handover-leader';

async function once(kind: 'graceful' | 'crash'): Promise<number> {
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
  const leader = await waitFor('an operator leader', 60_000, () => operatorLeader(http).catch(() => undefined));
  const name = leader.metadata?.name ?? '';
  const recorder = new LeaseRecorder(http, OPERATOR_NAMESPACE, new Set([LEASE]), log);
  await recorder.start();
  let stoppedAt: number;
  try {
    if (kind === 'graceful') {
      await http.request('DELETE', `/api/v1/namespaces/${OPERATOR_NAMESPACE}/pods/${name}`);
      stoppedAt = await waitFor('SIGTERM sent', 30_000, async () => (await sigtermTimes(OPERATOR_NAMESPACE)).get(name));
    } else {
      // The container's process as containerd started it (the latest start, should it have restarted).
      const pid = (await nodeEvents()).filter((e) => e.pod === name && e.event === 'container-started').at(-1)?.pid;
      if (!pid) throw new Error(`no running process for ${name}`);
      stoppedAt = Date.now();
      process.kill(pid, 'SIGKILL');
    }
    // Leading again: a renewal or acquisition observed after the stop (a new holder, or the restarted
    // container of the same pod, whose identity is unchanged).
    // A record renewed after the stop: never the dead process's last renewal delivered late.
    const renewedAfterStop = (o: { renewTime?: string }) => Date.parse(o.renewTime ?? '') > stoppedAt;
    const seen = await waitFor('a leader again', 120_000, () =>
      recorder.observations.find((o) => o.holder !== '' && renewedAfterStop(o) && (o.holder !== name || kind === 'crash')),
    );
    return seen.t - stoppedAt;
  } finally {
    recorder.stop();
  }
}

await installOperator(http);
const results: Record<string, number[]> = { graceful: [], crash: [] };
for (const kind of ['graceful', 'crash'] as const) {
  for (let i = 0; i < runs; i++) {
    const ms = await once(kind);
    results[kind]?.push(ms);
    console.log(`${kind} #${i + 1}: leader again after ${ms} ms`);
  }
}
const out = join(localDir, 'bench');
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'failover.json'), JSON.stringify({ measuredAt: new Date().toISOString(), leaseDuration: '15s', retryPeriod: '2s', results }, null, 2));
for (const [kind, ms] of Object.entries(results)) {
  const s = gapStats(ms);
  if (s) console.log(`${kind.padEnd(9)} p50 ${s.p50} ms  max ${s.max} ms  (${s.count} runs)`);
}
console.log('targets: graceful ≤ 1000 ms; crash ≤ lease duration + one retry (15 s + 2.2 × 2 s = 19 400 ms)');
