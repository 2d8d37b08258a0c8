// make soak: SOAK_ROLLOUTS rollouts of the sample driver (log-level flips, upstream lease timings, one replica) back
// to back, a fault from the matrix (hack/lib/faults.ts) injected into about half of them at a random moment, and
// the independent observer (hack/lib/observer.ts) checking the invariants throughout. Prints the summary
// (hack/bench/soak-summary.ts) and writes it with every rollout and handover to .local/bench/soak.json; exits 1 on any
// violation or anything left behind.
//   SOAK_ROLLOUTS=12  SOAK_SEED=<n> (the run prints the one it used)  SOAK_FAULT_SHARE=0.5  SOAK_MAX_MINUTES (none)
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, localDir, SAMPLE_DEPLOYMENT, SAMPLE_LEASES, SAMPLE_NAMESPACE as NS, waitFor } from '../lib/cluster.js';
import { type Fault, FAULTS, inject, POD_FAULTS, whenTerminating } from '../lib/faults.js';
import { Observer, type ObserverReport } from '../lib/observer.js';
import { SAMPLE_CR_PATH, setOperatorEnv, setSampleCrLevel, settledSampleLeader, standaloneSampleAt } from '../lib/operator.js';
import { sigtermTimes } from './recorder.js';
import { formatSoak, type SoakRollout, type SoakSummary, soakSummary } from './soak-summary.js';

export const SOAK_GATE_TIMEOUT_MS = 20_000;
const OPERATOR_CRASHES: ReadonlySet<Fault | 'none'> = new Set(['operator-leader-sigkill', 'operator-all-sigkill']);
const OPERATOR_CRASH_SPACING_MS = 10 * 60_000;

export interface SoakOptions {
  rollouts: number;
  /** stop starting rollouts after this long (the summary says how many were done) */
  maxMs?: number;
  seed: number;
  faultShare: number;
  /** progress lines */
  say?: (line: string) => void;
}

/** mulberry32: a small seeded generator, so a run can be repeated with its seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runSoak(o: SoakOptions): Promise<{ summary: SoakSummary; rollouts: SoakRollout[]; handovers: ObserverReport['handovers'] }> {
  const http = clusterHttp();
  const log = makeLogger('soak', process.env.LOG_LEVEL ?? 'error');
  const say = o.say ?? (() => undefined);
  const rnd = random(o.seed);
  const leases = Object.values(SAMPLE_LEASES);
  let level = 'Debug';
  await standaloneSampleAt(http, level);
  await setOperatorEnv(http, `GATE_TIMEOUT=${SOAK_GATE_TIMEOUT_MS / 1000}s`);
  const observer = new Observer(http, { namespace: NS, leases, gateTimeoutMs: SOAK_GATE_TIMEOUT_MS, log });
  await observer.start();
  const rollouts: SoakRollout[] = [];
  let lastOperatorCrash = -Infinity;
  try {
    const until = Date.now() + (o.maxMs ?? Infinity);
    for (let i = 1; i <= o.rollouts && Date.now() < until; i++) {
      const oldLeader = await settledSampleLeader(http);
      const oldName = oldLeader.metadata?.name ?? '';
      let fault: Fault | 'none' = rnd() < o.faultShare ? (FAULTS[Math.floor(rnd() * FAULTS.length)] ?? 'none') : 'none';
      // The operator crashes at most once per OPERATOR_CRASH_SPACING_MS: the kubelet doubles a container's restart
      // backoff with each crash (up to 5 minutes) and resets it only after 10 minutes of running, so crashing it
      // more often would keep it down for minutes and measure the kubelet instead.
      if (OPERATOR_CRASHES.has(fault) && Date.now() - lastOperatorCrash < OPERATOR_CRASH_SPACING_MS) {
        const others = FAULTS.filter((f) => !OPERATOR_CRASHES.has(f));
        fault = others[Math.floor(rnd() * others.length)] ?? 'none';
      }
      if (OPERATOR_CRASHES.has(fault)) lastOperatorCrash = Date.now();
      const delayMs = Math.floor(rnd() * (fault !== 'none' && POD_FAULTS.has(fault) ? 2_000 : 4_000));
      const startedAt = Date.now();
      level = level === 'Debug' ? 'Normal' : 'Debug';
      await setSampleCrLevel(http, level);
      let did: string | undefined;
      if (fault !== 'none') {
        // A pod's fault once its deletion has begun; the others at any moment of the rollout's first seconds.
        if (POD_FAULTS.has(fault)) {
          // Up to the kubelet's longest crash backoff: an operator that crashed before may start the rollout late.
          await whenTerminating(http, NS, oldName, 360_000);
        }
        await sleep(delayMs);
        did = await inject(fault, { http, namespace: NS, oldLeader });
      }
      await waitFor(
        'the new pod to hold every lease',
        420_000,
        async () => {
          const pod = await settledSampleLeader(http).catch(() => undefined);
          return pod && pod.metadata?.name !== oldName;
        },
        500,
      );
      const r: SoakRollout = { index: i, fault, ...(did ? { did: `${did} (${delayMs} ms in)` } : {}), startedAt, endedAt: Date.now() };
      rollouts.push(r);
      const found = observer.violations().length;
      say(
        `rollout ${i}/${o.rollouts}: ${((r.endedAt - r.startedAt) / 1000).toFixed(1)} s, ${r.did ?? 'no fault'}${found ? `; violations so far: ${found}` : ''}`,
      );
    }
  } catch (err) {
    observer.stopWatching();
    throw err;
  }
  const report = await observer.finish(SAMPLE_DEPLOYMENT, SAMPLE_CR_PATH);
  await setOperatorEnv(http, 'GATE_TIMEOUT-');
  const handovers = observer.handovers(await sigtermTimes(NS));
  return { summary: soakSummary(rollouts, handovers, report.violations), rollouts, handovers };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const env = z
    .object({
      SOAK_ROLLOUTS: z.coerce.number().int().positive().default(12),
      SOAK_SEED: z.coerce
        .number()
        .int()
        .nonnegative()
        .default(() => Math.floor(Math.random() * 2 ** 31)),
      SOAK_FAULT_SHARE: z.coerce.number().min(0).max(1).default(0.5),
      SOAK_MAX_MINUTES: z.coerce.number().positive().optional(),
    })
    .parse(process.env);
  console.log(
    `soak: ${env.SOAK_ROLLOUTS} rollouts, seed ${env.SOAK_SEED}, faults in ~${Math.round(env.SOAK_FAULT_SHARE * 100)}% (SOAK_SEED=${env.SOAK_SEED} repeats the draw)`,
  );
  const { summary, rollouts, handovers } = await runSoak({
    rollouts: env.SOAK_ROLLOUTS,
    seed: env.SOAK_SEED,
    faultShare: env.SOAK_FAULT_SHARE,
    say: (l) => console.log(l),
    ...(env.SOAK_MAX_MINUTES ? { maxMs: env.SOAK_MAX_MINUTES * 60_000 } : {}),
  });
  const out = join(localDir, 'bench');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'soak.json'), JSON.stringify({ measuredAt: new Date().toISOString(), seed: env.SOAK_SEED, summary, rollouts, handovers }, null, 2));
  console.log(`\n${formatSoak(summary)}\nwritten to ${join(out, 'soak.json')}`);
  process.exit(summary.violations.length === 0 && summary.leftBehind.length === 0 ? 0 : 1);
}
