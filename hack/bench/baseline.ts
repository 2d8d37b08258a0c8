// make bench-baseline: one rollout per variant (upstream and OpenShift timings, 1 and 2 replicas) of the
// stock sidecars, without csi-handover, printing per lease the old and new holder and the time from the old
// leader's SIGTERM to the new acquisition. Results also go to .local/bench/baseline.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, localDir } from '../lib/cluster.js';
import { formatHandovers, measureRollout, type Overlay, type RolloutResult } from './measure-rollout.js';

const log = makeLogger('bench-baseline', process.env.LOG_LEVEL ?? 'warn');
const http = clusterHttp();
// Ordered so each switch of timings happens while the old, short lease is in force.
const variants: Overlay[] = (process.env.BASELINE_VARIANTS?.split(',') as Overlay[] | undefined) ?? [
  'upstream',
  'upstream-1replica',
  'openshift-1replica',
  'openshift',
];

const results: RolloutResult[] = [];
for (const overlay of variants) {
  const r = await measureRollout(http, overlay, log);
  results.push(r);
  console.log(`${formatHandovers(r)}\n`);
}
const out = join(localDir, 'bench');
mkdirSync(out, { recursive: true });
writeFileSync(join(out, 'baseline.json'), JSON.stringify({ measuredAt: new Date().toISOString(), results }, null, 2));
console.log(`results written to ${join(out, 'baseline.json')}`);
