// make bench-race: the race a new pod runs on every handover. A new pod's sidecars try the lease as soon as they
// start; if that first try comes before the old leader's lease is released they find it held, and client-go
// waits a full retry period (26s × up to 2.2 at OpenShift timings) before trying again. The admission gate
// holds the new pod back while a handover is pending, in both modes, so none should lose it.
// Per handover, from the new holder's own log (client-go's "Attempting to acquire leader lease", its CRI log
// time), the Lease watch (release, acquisition) and a Pod watch (when the pod was created): was the acquirer's
// first attempt before the release, and how long from pod creation to the first attempt and to the acquisition.
// Run in companion mode and, for comparison, standalone, RACE_ROLLOUTS restarts each (both gate new pods at admission).
// Output: a table on stdout and .local/bench/race.json.
//   RACE_ROLLOUTS=7  RACE_MODES=companion,standalone  RACE_OVERLAY=openshift
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Deployment, V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import { Informer } from '../../src/kube/informer.js';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, deploySample, localDir, SAMPLE_DEPLOYMENT, SAMPLE_LEASES, SAMPLE_NAMESPACE as NS, type SampleOverlay } from '../lib/cluster.js';
import { installCrd, installOperator, LEVELS, setOperatorMode, setSampleCrLevel } from '../lib/operator.js';
import { PodLogFollower } from '../lib/pod-logs.js';
import { deploymentPath, rolloutRestart, templateVerbosity } from '../lib/rollout.js';
import { gapStats, type Handover, type RaceHandover, raceOf } from './handovers.js';
import { measureHandovers, waitSettled } from './measure-rollout.js';

const Params = z.object({
  RACE_ROLLOUTS: z.coerce.number().int().positive().default(7),
  RACE_MODES: z
    .string()
    .default('companion,standalone')
    .transform((s) => s.split(',').map((m) => z.enum(['companion', 'standalone']).parse(m.trim()))),
  RACE_OVERLAY: z.enum(['openshift', 'upstream']).default('openshift'),
});
const params = Params.parse(process.env);
const log = makeLogger('bench-race', process.env.LOG_LEVEL ?? 'warn');
const http = clusterHttp();
/** The sample overlays' retryPeriod (config/samples/hostpath): a lost race costs at least this. */
const RETRY_MS = { openshift: 26_000, upstream: 5_000 } as const;
const sidecarOf = (lease: string) => Object.entries(SAMPLE_LEASES).find(([, l]) => l === lease)?.[0] ?? '';

const driverDeployment = () => http.get<V1Deployment>(deploymentPath(NS, SAMPLE_DEPLOYMENT));

async function prepare(mode: 'companion' | 'standalone', overlay: SampleOverlay): Promise<void> {
  await installCrd();
  await deploySample(overlay);
  // The CR asks for what the template has, so the operator rolls nothing out on its account.
  const level = templateVerbosity(await driverDeployment()) ?? 2;
  await setSampleCrLevel(http, LEVELS[level] ?? 'Normal');
  await installOperator(http);
  await setOperatorMode(http, mode);
  await waitSettled(http);
}

async function runMode(mode: 'companion' | 'standalone'): Promise<RaceHandover[]> {
  await prepare(mode, params.RACE_OVERLAY);
  const out: RaceHandover[] = [];
  for (let rollout = 1; rollout <= params.RACE_ROLLOUTS; rollout++) {
    const firstSeen = new Map<string, number>();
    const terminalSeen = new Map<string, number>();
    const pods = new Informer<V1Pod>(http, { path: `/api/v1/namespaces/${NS}/pods`, log });
    const existing = new Set<string>();
    let synced = false;
    pods.on('add', (p) => {
      const name = p.metadata?.name ?? '';
      if (!synced) existing.add(name);
      else if (!firstSeen.has(name)) firstSeen.set(name, Date.now());
    });
    // The kubelet's report that the old pod is dead: every container terminated (or a terminal phase).
    pods.on('update', (p) => {
      const name = p.metadata?.name ?? '';
      const cs = p.status?.containerStatuses ?? [];
      const dead = p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' || (cs.length > 0 && cs.every((c) => c.state?.terminated));
      if (dead && !terminalSeen.has(name)) terminalSeen.set(name, Date.now());
    });
    pods.start();
    await pods.waitForSync();
    synced = true;
    const followers = new Map(Object.keys(SAMPLE_LEASES).map((c) => [c, new PodLogFollower(NS, c)]));
    for (const f of followers.values()) f.start();
    let handovers: Handover[];
    try {
      handovers = (await measureHandovers(http, params.RACE_OVERLAY, log, () => rolloutRestart(http, NS, SAMPLE_DEPLOYMENT))).handovers;
    } finally {
      pods.stop();
      for (const f of followers.values()) f.stop();
    }
    for (const h of handovers) {
      const entries = followers.get(sidecarOf(h.lease))?.entries(h.newHolder) ?? [];
      const r = raceOf(h, entries, firstSeen.get(h.newHolder), RETRY_MS[params.RACE_OVERLAY], {
        mode,
        rollout,
        newPod: !existing.has(h.newHolder),
        oldTerminalAt: terminalSeen.get(h.oldHolder),
      });
      out.push(r);
      const s = (ms?: number) => (ms === undefined ? '   n/a' : `${(ms / 1000).toFixed(2).padStart(6)}s`);
      console.log(
        `${mode} #${rollout} ${sidecarOf(h.lease).padEnd(40)} ${r.newPod ? 'new pod ' : 'standby '} gap ${s(r.gapMs)}  stop→dead ${s(diff(r.stopAt, r.oldTerminalAt))}  dead→released ${s(diff(r.oldTerminalAt, r.releasedAt))}  create→attempt ${s(r.createToAttemptMs)}  create→acquired ${s(r.createToAcquireMs)}  ${r.waitedForRetry === undefined ? 'no attempt logged' : r.waitedForRetry ? 'LOST THE RACE: waited a retry period' : r.attemptedFirst ? 'attempted as the release was seen; took it at once' : 'attempted after the release'}`,
      );
    }
  }
  return out;
}

const diff = (a?: number, b?: number) => (a === undefined || b === undefined ? undefined : b - a);

function summary(mode: string, all: readonly RaceHandover[]): string {
  const rs = all.filter((r) => r.mode === mode);
  const fresh = rs.filter((r) => r.newPod);
  const first = fresh.filter((r) => r.attemptedFirst === true);
  const lost = fresh.filter((r) => r.waitedForRetry === true);
  const fmt = (v: number[]) => {
    const g = gapStats(v);
    return g ? `p50 ${(g.p50 / 1000).toFixed(2)}s max ${(g.max / 1000).toFixed(2)}s` : 'n/a';
  };
  const nums = (f: (r: RaceHandover) => number | undefined, from = fresh) => from.map(f).filter((v): v is number => v !== undefined);
  return [
    `${mode}: ${rs.length} handovers in ${params.RACE_ROLLOUTS} rollouts; ${fresh.length} to a new pod, ${rs.length - fresh.length} to an old replica standing by`,
    `  new pods that lost the race (first attempt found the lease held, waited ≥ a retry period): ${lost.length} of ${fresh.length}; their gaps ${fmt(nums((r) => r.gapMs, lost))}`,
    `  new pods whose first attempt was logged before the watch saw the release: ${first.length} of ${fresh.length}`,
    `  new pods, gap ${fmt(nums((r) => r.gapMs))}; pod created → first attempt ${fmt(nums((r) => r.createToAttemptMs))}; → acquired ${fmt(nums((r) => r.createToAcquireMs))}`,
    `  standby replicas, gap ${fmt(
      nums(
        (r) => r.gapMs,
        rs.filter((r) => !r.newPod),
      ),
    )}`,
    `  every handover: SIGTERM → the kubelet's "all terminated" seen ${fmt(nums((r) => diff(r.stopAt, r.oldTerminalAt), rs))}; → released ${fmt(nums((r) => diff(r.oldTerminalAt, r.releasedAt), rs))}`,
  ].join('\n');
}

async function main(): Promise<void> {
  console.log(`make bench-race: ${params.RACE_MODES.join(', ')} × ${params.RACE_ROLLOUTS} rollouts, ${params.RACE_OVERLAY} timings`);
  const all: RaceHandover[] = [];
  for (const mode of params.RACE_MODES) all.push(...(await runMode(mode)));
  console.log('');
  for (const mode of params.RACE_MODES) console.log(summary(mode, all));
  const dir = join(localDir, 'bench');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'race.json'), `${JSON.stringify({ measuredAt: new Date().toISOString(), params, handovers: all }, null, 2)}\n`);
  console.log(`\nwritten: ${join(dir, 'race.json')}`);
}

await main();
