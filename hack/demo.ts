// make demo: the whole story on the local cluster, with the real upstream CSI sidecars.
//   1. Without csi-handover: change the driver's log level the way csi-operator does (rewrite --v in the
//      controller Deployment and the node DaemonSet) and measure how long every sidecar has no leader — and, with a storage probe
//      submitting real work every second (PVCs, attachments, resizes, snapshots), how long each sidecar's
//      operations stall.
//   2. With csi-handover: install the operator and its node witness (config/witness), `kubectl patch
//      clustercsidriver … logLevel`, measure again, and show where each handover's time went.
//   3. Side by side, and what the operator reports in the ClusterCSIDriver.
// DEMO_TIMINGS=upstream uses the upstream 15s/10s/5s lease timings (quicker); the default is OpenShift's
// 137s/107s/26s, under which step 1 takes a few minutes — that is the point.
import { makeLogger } from '../src/log.js';
import { formatHandovers, type Overlay, type RolloutResult, settle, waitSettled } from './bench/measure-rollout.js';
import { type ProbedRollout, probedRollout, removeStaleProbes, SIDECAR_OF_KIND } from './bench/storage-probe.js';
import {
  clusterHttp,
  kubeconfigPath,
  kubectl,
  manageSnapshotController,
  nodeRuntimes,
  SAMPLE_DRIVER,
  SAMPLE_NAMESPACE as NS,
  SAMPLE_SIDECAR_LEASES,
  waitFor,
} from './lib/cluster.js';
import { installOperator, installWitness, setOperatorMode, setSampleCrLevel } from './lib/operator.js';
import { figuresByRuntime, formatRuntimeFigures, formatTimelines } from './bench/lease-timeline.js';
import { setVerbosityDirectly } from './lib/rollout.js';

const log = makeLogger('demo', process.env.LOG_LEVEL ?? 'warn');
const http = clusterHttp();
const timings = process.env.DEMO_TIMINGS === 'upstream' ? 'upstream' : 'openshift';
const overlay: Overlay = process.env.DEMO_REPLICAS === '1' ? `${timings}-1replica` : timings;

await removeStaleProbes(http, log);
console.log(
  `== 1. Without csi-handover (${overlay} timings): log level 2 → 4 by rewriting --v in the driver's Deployments and DaemonSet, as csi-operator does`,
);
await settle(http, overlay, log);
await manageSnapshotController(); // the sixth sidecar rolls and is measured too
const withoutRun = await probedRollout(http, overlay, log, `demo-without-${Date.now().toString(36)}`, () => setVerbosityDirectly(http, NS, SAMPLE_DRIVER, 4));
const without = withoutRun.rollout;
console.log(`${formatHandovers(without)}\n`);

console.log(
  '== 2. With csi-handover and its node witness: kubectl patch clustercsidriver hostpath.csi.k8s.io --type=merge -p \'{"spec":{"logLevel":"Trace"}}\' (4 → 6)',
);
await installOperator(http);
await installWitness(http);
await setOperatorMode(http, 'standalone'); // whatever an earlier benchmark left
await setSampleCrLevel(http, 'Debug');
// The CR starts at Debug (--v=4, what step 1 left); settle, then the change under test: Debug → Trace.
await waitSettled(http);
const withRun = await probedRollout(http, overlay, log, `demo-with-${Date.now().toString(36)}`, () =>
  kubectl('patch', 'clustercsidriver', SAMPLE_DRIVER, '--type=merge', '-p', '{"spec":{"logLevel":"Trace"}}'),
);
const withOp = withRun.rollout;
console.log(`${formatHandovers(withOp)}\n`);
console.log("   Where the time went, per lease (seconds after the old leader's SIGTERM; the node's record, the API, the sidecar's log):");
console.log(`${formatTimelines(withOp.timelines).replace(/^/gm, '   ')}\n`);
// node-1 runs containerd, node-2 CRI-O with conmon as OpenShift lays it out: the witness's proof on each.
console.log("   By the old leader's node runtime (p50s after SIGTERM; proven: the witness found every container exited):");
console.log(
  `${formatRuntimeFigures(figuresByRuntime(withOp.timelines, await nodeRuntimes(http)))
    .map((l) => `   ${l}`)
    .join('\n')}\n`,
);

console.log('== 3. Side by side, per sidecar: time without a leader (old leader SIGTERM → new leader), and the stall of');
console.log('   its storage operations (the longest time none completed although one was pending)');
/** The longest leaderless time of the lease in the rollout (a lease may move more than once). */
const lastGap = (r: RolloutResult, lease: string) =>
  Math.max(...r.handovers.filter((h) => h.lease === lease && h.gapMs !== undefined).map((h) => h.gapMs ?? 0));
const stallOf = (r: ProbedRollout, sidecar: string) => r.stats.find((k) => SIDECAR_OF_KIND[k.kind] === sidecar);
const fmt = (ms: number | undefined) => (ms !== undefined && Number.isFinite(ms) ? `${(ms / 1000).toFixed(1)}s` : 'n/a');
const times = (a: number | undefined, b: number | undefined) =>
  a !== undefined && b !== undefined && Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${Math.round(a / b)}×` : 'n/a';
const nameWidth = Math.max(...Object.keys(SAMPLE_SIDECAR_LEASES).map((k) => k.length));
console.log(`  ${''.padEnd(nameWidth)} ${'leaderless'.padStart(30)}   ${'storage operations stalled'.padStart(30)}`);
console.log(
  `  ${'sidecar'.padEnd(nameWidth)} ${'without'.padStart(9)} ${'with'.padStart(9)} ${'shorter by'.padStart(10)}   ${'without'.padStart(9)} ${'with'.padStart(9)} ${'shorter by'.padStart(10)}`,
);
for (const [sidecar, lease] of Object.entries(SAMPLE_SIDECAR_LEASES)) {
  const [a, b] = [lastGap(without, lease), lastGap(withOp, lease)];
  if (!Number.isFinite(a) && !Number.isFinite(b)) continue; // not rolled (snapshot-controller, unlabelled)
  const [sa, sb] = [stallOf(withoutRun, sidecar)?.stallMs, stallOf(withRun, sidecar)?.stallMs];
  console.log(
    `  ${sidecar.padEnd(nameWidth)} ${fmt(a).padStart(9)} ${fmt(b).padStart(9)} ${times(a, b).padStart(10)}   ${fmt(sa).padStart(9)} ${fmt(sb).padStart(9)} ${times(sa, sb).padStart(10)}`,
  );
}
const submitted = (r: ProbedRollout) => r.stats.reduce((n, k) => n + k.submitted, 0);
console.log(
  `  Storage operations submitted during the rollout: ${submitted(withoutRun)} without, ${submitted(withRun)} with csi-handover; every object the probe created is deleted again.`,
);
console.log(`  Deployment rollout: ${without.rolloutSeconds.toFixed(1)}s without, ${withOp.rolloutSeconds.toFixed(1)}s with csi-handover\n`);

console.log('== What the operator reports');
await waitFor(
  'the handover report',
  30_000,
  async () => (await kubectl('get', 'csihandoverreport', SAMPLE_DRIVER, '-o', 'jsonpath={.status.lastRollout.largestGap}').catch(() => '')).length > 0,
);
console.log(await kubectl('get', 'clustercsidriver'));
console.log(await kubectl('get', 'csihandoverreport'));
console.log(
  await kubectl(
    'get',
    'clustercsidriver',
    SAMPLE_DRIVER,
    '-o',
    'jsonpath={range .status.conditions[*]}{.type}{"\\t"}{.status}{"\\t"}{.reason}{"\\t"}{.message}{"\\n"}{end}',
  ),
);
const events = (
  await kubectl('get', 'events', '-n', 'default', '--field-selector', 'reason=LeaseHandedOver', '-o', 'jsonpath={range .items[*]}{.message}{"\\n"}{end}')
)
  .split('\n')
  .filter((m) => withOp.handovers.some((h) => m.includes(`${h.oldHolder} → ${h.newHolder}`)));
console.log(
  `Events (LeaseHandedOver on clustercsidriver/${SAMPLE_DRIVER}) for this rollout:\n${events.map((m) => `  ${m.replace(/: (?=\S+\/\S+: )/, ':\n    ').replaceAll('; ', ';\n    ')}`).join('\n')}\n`,
);
console.log(`The cluster is still running: export KUBECONFIG=${kubeconfigPath}; stop it with make cluster-down.`);
