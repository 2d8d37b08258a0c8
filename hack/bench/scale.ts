// make bench-scale: the operator against SCALE_PODS pods and SCALE_LEASES leases across SCALE_NAMESPACES
// namespaces while handovers happen, for SCALE_MINUTES. The pods are virtual: KWOK plays them on fake nodes
// (hack/cluster.sh with CSI_HANDOVER_KWOK_NODES; stages in hack/kwok/), reporting them Running and, on deletion,
// every container terminated and then the object deleted, as a kubelet does, with no process behind them. The
// operator itself runs from its image on the real nodes. Each namespace has one managed driver Deployment (2 replicas, a
// ClusterCSIDriver each) whose pods hold the sidecar leases, and filler pods that hold or do not hold the
// rest. This script plays the sidecars: it renews every lease of a live holder, and when a lease it watches is
// released it acquires it for a live pod of the driver. Every SCALE_HANDOVER_INTERVAL_MS it deletes a driver
// pod that holds leases and measures, from its own watches, the time from the holder's death (containers
// reported terminated, or the pod gone if seen first) to the release. From the operator leader's /metrics
// (the operator is restarted first, so each run starts from a fresh process): RSS, V8 heap, CPU, their trend,
// and the API requests per handover. Results: a table, and .local/bench/scale.json.
// Setup errors fail the run; missed targets are reported as MISSED in the table.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import { DRIVER_LABEL } from '../../src/api/names.js';
import { DELETION_COST, desiredDeletionCost } from '../../src/handover/deletion-cost.js';
import { PatchType } from '../../src/kube/http.js';
import { isConflict, isNotFound } from '../../src/kube/errors.js';
import { Informer } from '../../src/kube/informer.js';
import { acquiredRecord, LeaseRecord, microTime } from '../../src/leaderelection/lease-record.js';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, localDir, waitFor } from '../lib/cluster.js';
import { grantDriverNamespace, installOperator, OPERATOR_NAMESPACE, operatorLeader } from '../lib/operator.js';
import { rolloutRestart, waitRolloutComplete } from '../lib/rollout.js';
import { countQuantity, metricSum, type PlannedLease, parseMetrics, percentile, planLeases, type Point, type Sample, slope, thirds } from './scale-stats.js';

const Params = z.object({
  SCALE_PODS: z.coerce.number().int().positive().default(5000),
  SCALE_LEASES: z.coerce.number().int().positive().default(1000),
  SCALE_NAMESPACES: z.coerce.number().int().positive().default(50),
  SCALE_MINUTES: z.coerce.number().positive().default(10),
  SCALE_HANDOVER_INTERVAL_MS: z.coerce.number().int().positive().default(2000),
  /** How often a live holder renews (OpenShift's retryPeriod is 26s). */
  SCALE_RENEW_SECONDS: z.coerce.number().positive().default(26),
  SCALE_SAMPLE_SECONDS: z.coerce.number().positive().default(10),
  /** Requests the bench keeps in flight while it creates objects. */
  SCALE_CONCURRENCY: z.coerce.number().int().positive().default(20),
  /** 1: leave the namespaces and ClusterCSIDrivers in place at the end. */
  SCALE_KEEP: z.enum(['', '0', '1']).default(''),
});
const params = Params.parse(process.env);
const P = params.SCALE_PODS;
const N = params.SCALE_NAMESPACES;
if (P < 3 * N) throw new Error(`SCALE_PODS=${P} is too few for SCALE_NAMESPACES=${N}: each namespace needs its 2 driver pods and a filler`);
if (params.SCALE_LEASES < N) throw new Error(`SCALE_LEASES=${params.SCALE_LEASES} is too few for SCALE_NAMESPACES=${N}: each namespace's driver needs a lease`);

// CPU: no higher than the last run before the requests and caches were trimmed (13.6% of a core, 2026-12-01).
const TARGETS = { rssMiB: 150, p99Ms: 250, growthMiBPer10Min: 5, requestsPerHandover: 8, cpuMeanPercent: 13.6 };
const BENCH_LABEL = 'csi-handover.io/bench';
const BENCH = `${BENCH_LABEL}=scale`;
const DEPLOYMENT = 'csi-controller';
const LEASE_DURATION_SECONDS = 137;
const RELEASE_TIMEOUT_MS = 30_000;
const SIDECARS = ['csi-provisioner', 'csi-attacher', 'csi-resizer', 'csi-snapshotter'];
/** KWOK's fake nodes, as hack/cluster.sh creates them: labelled, and tainted so that nothing else lands there. */
const KWOK_LABEL = 'csi-handover.io/kwok';
const ON_KWOK = {
  nodeSelector: { [KWOK_LABEL]: 'true' },
  tolerations: [{ key: 'kwok.x-k8s.io/node', operator: 'Equal', value: 'fake', effect: 'NoSchedule' }],
};

const log = makeLogger('bench-scale', process.env.LOG_LEVEL ?? 'warn');
const http = clusterHttp();
const t0 = Date.now();
const say = (msg: string) => console.log(`[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)}s] ${msg}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const nsName = (i: number) => `scale-${String(i).padStart(String(N - 1).length, '0')}`;
const driverName = (i: number) => `${nsName(i)}.csi.example.com`;
const fillers = P - 2 * N;
const fillersIn = (i: number) => Math.floor(fillers / N) + (i < fillers % N ? 1 : 0);
let aborted = false;
process.on('SIGINT', () => {
  if (aborted) process.exit(130);
  aborted = true;
  say('interrupted: finishing up and cleaning (Ctrl-C again to quit at once)');
});

// ---- creating objects ----

/** Runs `fn` over `items` with at most `limit` in flight, printing progress every tenth; the first error fails it. */
async function inPool<T>(what: string, items: readonly T[], fn: (item: T) => Promise<unknown>, limit = params.SCALE_CONCURRENCY): Promise<void> {
  let next = 0;
  let done = 0;
  const started = Date.now();
  const step = Math.max(1, Math.ceil(items.length / 10));
  const worker = async () => {
    while (next < items.length && !aborted) {
      const item = items[next++] as T;
      await fn(item);
      if (++done % step === 0 || done === items.length) say(`  ${what}: ${done}/${items.length} (${(done / ((Date.now() - started) / 1000)).toFixed(0)}/s)`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  if (aborted) throw new Error(`interrupted while creating ${what}`);
}

async function create(path: string, body: unknown): Promise<void> {
  try {
    await http.request('POST', path, { body });
  } catch (err) {
    if (!isConflict(err)) throw err; // already there: a re-run after an interrupted cleanup
  }
}

async function deleteIfPresent(path: string, query?: Record<string, string>): Promise<void> {
  try {
    // A collection delete of a namespace's pods answers only when they are all gone: allow it minutes.
    await http.request('DELETE', path, { ...(query ? { query } : {}), signal: AbortSignal.timeout(300_000) });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}

const benchNamespaces = async () =>
  (await http.get<{ items: { metadata?: { name?: string } }[] }>('/api/v1/namespaces', { labelSelector: BENCH })).items.map((n) => n.metadata?.name ?? '');

/** Deletes what a bench run created (namespaces, ClusterCSIDrivers) and waits until the namespaces are gone. */
async function cleanUp(): Promise<void> {
  await deleteIfPresent('/apis/operator.openshift.io/v1/clustercsidrivers', { labelSelector: BENCH });
  const namespaces = await benchNamespaces();
  if (namespaces.length === 0) return;
  say(`deleting ${namespaces.length} bench namespace(s)`);
  // The pods are virtual (no process to stop): deleting them at once spares the namespace controller and
  // KWOK a graceful termination of thousands of pods (minutes per namespace otherwise).
  await inPoolQuiet(namespaces, 4, (ns) => deleteIfPresent(`/api/v1/namespaces/${ns}/pods`, { gracePeriodSeconds: '0' }));
  for (const ns of namespaces) await deleteIfPresent(`/api/v1/namespaces/${ns}`);
  let last = -1;
  await waitFor(
    'bench namespaces deleted',
    15 * 60_000,
    async () => {
      const left = (await benchNamespaces()).length;
      if (left !== last && left > 0) say(`  ${left} namespace(s) still terminating`);
      last = left;
      return left === 0;
    },
    2_000,
  );
}

/** KWOK's fake nodes (hack/cluster.sh labels them) must be Ready and admit every pod. */
async function checkCapacity(): Promise<V1Node[]> {
  const nodes = (await http.get<{ items: V1Node[] }>('/api/v1/nodes', { labelSelector: `${KWOK_LABEL}=true` })).items.filter((n) =>
    n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
  );
  const allocatable = nodes.reduce((sum, n) => sum + (countQuantity(n.status?.allocatable?.pods) || 0), 0);
  const existing = (await http.get<{ items: unknown[] }>('/api/v1/pods')).items.length;
  const needed = P + N + existing; // + a replacement per namespace while a handover is in flight
  if (nodes.length === 0) throw new Error(`no Ready KWOK node (label ${KWOK_LABEL}=true): start them with CSI_HANDOVER_KWOK_NODES=2 hack/cluster.sh up`);
  if (allocatable < needed) throw new Error(`the ${nodes.length} Ready KWOK node(s) admit ${allocatable} pods; the bench needs ${needed}`);
  return nodes;
}

async function createNamespaces(): Promise<void> {
  await inPool(
    'namespaces',
    Array.from({ length: N }, (_, i) => i),
    async (i) => {
      await create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsName(i), labels: { [BENCH_LABEL]: 'scale' } } });
      // Pods can be created once the service-account controller has made the namespace's default account.
      await waitFor(
        `default service account in ${nsName(i)}`,
        60_000,
        () => http.get(`/api/v1/namespaces/${nsName(i)}/serviceaccounts/default`).then(() => true),
        200,
      );
      await grantDriverNamespace(http, nsName(i));
    },
  );
}

async function createDrivers(): Promise<void> {
  await inPool(
    'drivers (ClusterCSIDriver + Deployment)',
    Array.from({ length: N }, (_, i) => i),
    async (i) => {
      await create('/apis/operator.openshift.io/v1/clustercsidrivers', {
        apiVersion: 'operator.openshift.io/v1',
        kind: 'ClusterCSIDriver',
        metadata: { name: driverName(i), labels: { [BENCH_LABEL]: 'scale' } },
        spec: { managementState: 'Managed', logLevel: 'Normal', operatorLogLevel: 'Normal' },
      });
      const labels = { app: DEPLOYMENT, [DRIVER_LABEL]: driverName(i), [BENCH_LABEL]: 'scale' };
      await create(`/apis/apps/v1/namespaces/${nsName(i)}/deployments`, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: DEPLOYMENT, labels },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: DEPLOYMENT } },
          template: {
            metadata: { labels },
            spec: {
              ...ON_KWOK,
              terminationGracePeriodSeconds: 30,
              containers: SIDECARS.map((name) => ({ name, image: 'csi-handover.local/virtual:v1', args: ['--v=2'] })),
            },
          },
        },
      });
    },
  );
}

/** Filler pods: plain virtual pods of no managed workload, bound round-robin to the nodes. */
async function createFillers(nodes: V1Node[]): Promise<void> {
  const items: { ns: number; j: number; node: string }[] = [];
  for (let i = 0; i < N; i++) for (let j = 0; j < fillersIn(i); j++) items.push({ ns: i, j, node: nodes[items.length % nodes.length]?.metadata?.name ?? '' });
  await inPool('filler pods', items, ({ ns, j, node }) =>
    create(`/api/v1/namespaces/${nsName(ns)}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `filler-${j}`, labels: { app: 'filler', [BENCH_LABEL]: 'scale' } },
      spec: { nodeName: node, tolerations: ON_KWOK.tolerations, containers: [{ name: 'app', image: 'csi-handover.local/virtual:v1' }] },
    }),
  );
}

// ---- the bench's own view: pods and leases it created, by watch ----

const pods = new Informer<V1Pod>(http, { path: '/api/v1/pods', labelSelector: BENCH, log });
const leases = new Informer<V1Lease>(http, { path: '/apis/coordination.k8s.io/v1/leases', labelSelector: BENCH, log });

const isReady = (p: V1Pod) =>
  p.status?.phase === 'Running' && !p.metadata?.deletionTimestamp && p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
const driverPods = (ns: string) =>
  pods
    .list()
    .filter((p) => p.metadata?.namespace === ns && p.metadata.labels?.app === DEPLOYMENT)
    .sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
const holderOf = (l: V1Lease) => (typeof l.spec?.holderIdentity === 'string' ? l.spec.holderIdentity : '');
const leasesHeldBy = (ns: string, pod: string) => leases.list().filter((l) => l.metadata?.namespace === ns && holderOf(l) === pod);

async function createLeases(plan: PlannedLease[]): Promise<void> {
  const now = Date.now();
  await inPool('leases', plan, async (l) => {
    const ns = nsName(l.namespace);
    let holder: string;
    if (l.holder.kind === 'driver') {
      const pod = driverPods(ns).filter(isReady)[l.holder.replica];
      if (!pod) throw new Error(`driver pod ${l.holder.replica} of ${ns} is not ready`);
      holder = pod.metadata?.name ?? '';
    } else if (l.holder.kind === 'filler') {
      holder = `filler-${l.holder.index}${l.holder.clientGoSuffix ? `_${l.holder.index.toString(16).padStart(8, '0')}-scale` : ''}`;
    } else {
      holder = `unmanaged-holder-${l.holder.index}`;
    }
    await create(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: l.name, labels: { [BENCH_LABEL]: 'scale' } },
      spec: {
        holderIdentity: holder,
        leaseDurationSeconds: LEASE_DURATION_SECONDS,
        acquireTime: microTime(now),
        renewTime: microTime(now),
        leaseTransitions: 0,
      },
    });
  });
}

// ---- playing the sidecars: renewals by live holders ----

/** Holders whose pod the bench deleted (`namespace/pod`): they stop renewing at once, as a dead sidecar does. */
const stoppedHolders = new Set<string>();
const lastRenewal = new Map<string, number>();
let renewals = 0;
let renewTimer: NodeJS.Timeout | undefined;

function startRenewing(): void {
  const period = params.SCALE_RENEW_SECONDS * 1000;
  // Spread the first renewals over one period, as holders that started at different times would be.
  for (const l of leases.list()) lastRenewal.set(`${l.metadata?.namespace}/${l.metadata?.name}`, Date.now() - Math.random() * period);
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const due = leases.list().filter((l) => {
        const holder = holderOf(l);
        const key = `${l.metadata?.namespace}/${l.metadata?.name}`;
        return holder !== '' && !stoppedHolders.has(`${l.metadata?.namespace}/${holder}`) && Date.now() - (lastRenewal.get(key) ?? 0) >= period;
      });
      await inPoolQuiet(due, 10, renew);
    } finally {
      busy = false;
    }
  };
  renewTimer = setInterval(() => void tick(), 500);
}

async function inPoolQuiet<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++] as T);
    }),
  );
}

/** A renewal, only while the holder is still the one we renew for (a JSON patch test), as client-go's update with the read resourceVersion. */
async function renew(l: V1Lease): Promise<void> {
  const ns = l.metadata?.namespace ?? '';
  const name = l.metadata?.name ?? '';
  lastRenewal.set(`${ns}/${name}`, Date.now());
  try {
    await http.patch(
      `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${name}`,
      [
        { op: 'test', path: '/spec/holderIdentity', value: holderOf(l) },
        { op: 'replace', path: '/spec/renewTime', value: microTime(Date.now()) },
      ],
      PatchType.json,
    );
    renewals++;
  } catch (err) {
    // The holder changed meanwhile (released, taken): not ours to renew any more.
    if (!isNotFound(err) && (err as { status?: number }).status !== 422) log.warn({ lease: `${ns}/${name}`, err: String(err) }, 'renewal failed');
  }
}

// ---- handovers ----

interface LeaseRelease {
  lease: string;
  releasedAt?: number;
  acquiredAt?: number;
  newHolder?: string;
}

interface HandoverRun {
  namespace: string;
  pod: string;
  deleteAt: number;
  /** first sight of every container terminated during the deletion */
  terminatedAt?: number;
  goneAt?: number;
  leases: LeaseRelease[];
}

const handovers: HandoverRun[] = [];
const pendingByPod = new Map<string, HandoverRun>(); // `namespace/pod` → its handover
const pendingByLease = new Map<string, { run: HandoverRun; release: LeaseRelease }>(); // `namespace/lease`
let acquireErrors = 0;

function watchHandovers(): void {
  const allTerminated = (p: V1Pod) => {
    const cs = p.status?.containerStatuses ?? [];
    return cs.length > 0 && cs.every((c) => c.state?.terminated != null);
  };
  const podSeen = (p: V1Pod) => {
    const run = pendingByPod.get(`${p.metadata?.namespace}/${p.metadata?.name}`);
    if (run && p.metadata?.deletionTimestamp && allTerminated(p)) run.terminatedAt ??= Date.now();
  };
  pods.on('update', podSeen).on('delete', (p) => {
    const run = pendingByPod.get(`${p.metadata?.namespace}/${p.metadata?.name}`);
    if (run) run.goneAt ??= Date.now();
  });
  leases.on('update', (l) => {
    const key = `${l.metadata?.namespace}/${l.metadata?.name}`;
    const pending = pendingByLease.get(key);
    if (!pending || holderOf(l) !== '' || pending.release.releasedAt !== undefined) return;
    pending.release.releasedAt = Date.now();
    void acquireForLivePod(l, pending.run, pending.release).catch((err: unknown) => {
      acquireErrors++;
      log.warn({ lease: key, err: String(err) }, 'acquiring the released lease failed');
    });
  });
}

/** As the sidecar on a live replica would: take the released lease (the live driver pod holding the fewest). */
async function acquireForLivePod(released: V1Lease, run: HandoverRun, release: LeaseRelease): Promise<void> {
  const ns = run.namespace;
  const path = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${released.metadata?.name}`;
  let current = released;
  const deadline = Date.now() + 60_000;
  for (;;) {
    const candidates = driverPods(ns).filter((p) => isReady(p) && p.metadata?.name !== run.pod);
    const pod = candidates.sort((a, b) => leasesHeldBy(ns, a.metadata?.name ?? '').length - leasesHeldBy(ns, b.metadata?.name ?? '').length)[0];
    if (!pod) {
      if (Date.now() > deadline) throw new Error(`no live driver pod in ${ns} to take ${release.lease}`);
      await sleep(200);
      continue;
    }
    const identity = pod.metadata?.name ?? '';
    const previous = LeaseRecord.parse(current.spec ?? {});
    try {
      await http.request('PUT', path, { body: { ...current, spec: acquiredRecord(previous, identity, LEASE_DURATION_SECONDS, Date.now()) } });
      release.acquiredAt = Date.now();
      release.newHolder = identity;
      lastRenewal.set(`${ns}/${release.lease}`, Date.now());
      return;
    } catch (err) {
      if (!isConflict(err)) throw err;
      current = await http.get<V1Lease>(path);
      if (holderOf(current) !== '') return; // someone else took it
    }
  }
}

/** Deletes the next namespace's lease-holding driver pod, if that namespace is settled (two ready replicas, nothing pending). */
async function startHandover(cursor: { next: number }): Promise<boolean> {
  for (let tries = 0; tries < N; tries++) {
    const ns = nsName(cursor.next);
    cursor.next = (cursor.next + 1) % N;
    if ([...pendingByPod.values()].some((r) => r.namespace === ns)) continue;
    const live = driverPods(ns);
    if (live.length !== 2 || !live.every(isReady)) continue;
    const holder = live
      .map((p) => ({ pod: p.metadata?.name ?? '', held: leasesHeldBy(ns, p.metadata?.name ?? '') }))
      .filter((h) => h.held.length > 0)
      .sort((a, b) => b.held.length - a.held.length)[0];
    if (!holder) continue;
    // The holder stops renewing before its pod is told to stop, as a sidecar that is killed would.
    stoppedHolders.add(`${ns}/${holder.pod}`);
    const run: HandoverRun = { namespace: ns, pod: holder.pod, deleteAt: Date.now(), leases: holder.held.map((l) => ({ lease: l.metadata?.name ?? '' })) };
    pendingByPod.set(`${ns}/${holder.pod}`, run);
    for (const release of run.leases) pendingByLease.set(`${ns}/${release.lease}`, { run, release });
    try {
      await http.request('DELETE', `/api/v1/namespaces/${ns}/pods/${holder.pod}`);
    } catch (err) {
      // Gone meanwhile (our cache was behind): not a handover; try the next namespace.
      if (!isNotFound(err)) throw err;
      pendingByPod.delete(`${ns}/${holder.pod}`);
      stoppedHolders.delete(`${ns}/${holder.pod}`);
      for (const release of run.leases) pendingByLease.delete(`${ns}/${release.lease}`);
      continue;
    }
    handovers.push(run);
    return true;
  }
  return false;
}

/** Forgets finished handovers (every lease released, or timed out) so their namespace can go again. */
function settleHandovers(now: number): void {
  for (const [key, run] of pendingByPod) {
    const done = run.leases.every((l) => l.acquiredAt !== undefined) && run.goneAt !== undefined;
    if (!done && now - run.deleteAt < RELEASE_TIMEOUT_MS) continue;
    pendingByPod.delete(key);
    stoppedHolders.delete(key);
    for (const l of run.leases) pendingByLease.delete(`${run.namespace}/${l.lease}`);
  }
}

// ---- the operator's own numbers ----

interface MetricsSample {
  t: number;
  phase: 'setup' | 'handovers' | 'drain';
  leader: string;
  rssBytes?: number;
  /** V8 heap in use: unlike RSS, not inflated by the heap room V8 reserves and keeps */
  heapUsedBytes?: number;
  /** what V8 has reserved for the heap, and memory outside it (Buffers, TLS): with the heap used, where RSS goes */
  heapTotalBytes?: number;
  externalBytes?: number;
  cpuSeconds?: number;
  apiRequests?: number;
  /** of those, the operator's own leader election (renewals on its clock, whatever the handovers) */
  leaderElectionRequests?: number;
  /** the rest (the work handovers cause), by `"<verb> <resource>"` */
  requestsBy?: Record<string, number>;
}

const samples: MetricsSample[] = [];
let phase: MetricsSample['phase'] = 'setup';

async function scrape(): Promise<MetricsSample | undefined> {
  try {
    const leader = await operatorLeader(http);
    const text = await (await fetch(`http://${leader.status?.podIP}:8080/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
    const all: Sample[] = parseMetrics(text);
    const requestsBy: Record<string, number> = {};
    let leaderElectionRequests = 0;
    for (const s of all.filter((x) => x.name === 'csi_handover_api_requests_total')) {
      if (s.labels.caller === 'leader-election') {
        leaderElectionRequests += s.value;
        continue;
      }
      const k = `${s.labels.verb} ${s.labels.resource}`;
      requestsBy[k] = (requestsBy[k] ?? 0) + s.value;
    }
    const sample: MetricsSample = {
      t: Date.now(),
      phase,
      leader: leader.metadata?.name ?? '',
      rssBytes: metricSum(all, 'csi_handover_process_resident_memory_bytes'),
      heapUsedBytes: metricSum(all, 'csi_handover_nodejs_heap_size_used_bytes'),
      heapTotalBytes: metricSum(all, 'csi_handover_nodejs_heap_size_total_bytes'),
      externalBytes: metricSum(all, 'csi_handover_nodejs_external_memory_bytes'),
      cpuSeconds: metricSum(all, 'csi_handover_process_cpu_seconds_total'),
      apiRequests: metricSum(all, 'csi_handover_api_requests_total'),
      leaderElectionRequests,
      requestsBy,
    };
    samples.push(sample);
    return sample;
  } catch (err) {
    log.warn({ err: String(err) }, 'scraping the operator leader failed');
    return undefined;
  }
}

// ---- the run ----

const MiB = 1024 * 1024;
const fmtMs = (v: number | undefined) => (v === undefined ? 'n/a' : `${Math.round(v)} ms`);
const fmtMiB = (v: number | undefined) => (v === undefined ? 'n/a' : `${(v / MiB).toFixed(1)} MiB`);

async function main(): Promise<void> {
  say(
    `bench-scale: ${P} pods (${2 * N} driver + ${fillers} filler), ${params.SCALE_LEASES} leases, ${N} namespaces, ` +
      `${params.SCALE_MINUTES} min of handovers every ${params.SCALE_HANDOVER_INTERVAL_MS} ms, renewals every ${params.SCALE_RENEW_SECONDS}s`,
  );
  await cleanUp();
  const nodes = await checkCapacity();
  say('installing the operator (its image, on the real nodes), and restarting it so every run starts from a fresh process');
  await installOperator(http);
  await rolloutRestart(http, OPERATOR_NAMESPACE, 'csi-handover');
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
  const idle = await waitFor('the new operator leader’s metrics', 120_000, () => scrape(), 1_000);
  const sampler = setInterval(() => void scrape(), params.SCALE_SAMPLE_SECONDS * 1000);
  try {
    say(`operator leader ${idle?.leader}: ${fmtMiB(idle?.rssBytes)} RSS at the start`);
    pods.start();
    leases.start();
    await Promise.all([pods.waitForSync(), leases.waitForSync()]);
    await createNamespaces();
    await createDrivers();
    await createFillers(nodes);
    let lastReady = -1;
    await waitFor(
      `${P} bench pods running and ready`,
      30 * 60_000,
      () => {
        const ready = pods.list().filter(isReady).length;
        if (ready !== lastReady) say(`  pods ready: ${ready}/${P}`);
        lastReady = ready;
        return ready >= P && Array.from({ length: N }, (_, i) => driverPods(nsName(i)).filter(isReady).length === 2).every(Boolean);
      },
      2_000,
    );
    const plan = planLeases({ namespaces: N, leases: params.SCALE_LEASES, fillersPerNamespace: fillersIn, driverName });
    await createLeases(plan);
    startRenewing();
    watchHandovers();
    // The operator has caught up when every lease-holding driver pod carries its deletion cost.
    await waitFor(
      'the operator to set every driver pod’s deletion cost',
      10 * 60_000,
      () => {
        for (let i = 0; i < N; i++) {
          for (const p of driverPods(nsName(i))) {
            const held = leasesHeldBy(nsName(i), p.metadata?.name ?? '').length;
            if ((p.metadata?.annotations?.[DELETION_COST] ?? '0') !== (desiredDeletionCost(held) ?? '0')) return false;
          }
        }
        return true;
      },
      1_000,
    );
    const before = await scrape();
    say(`setup done: operator leader ${before?.leader} at ${fmtMiB(before?.rssBytes)} RSS; handovers for ${params.SCALE_MINUTES} min`);

    phase = 'handovers';
    const phaseStart = await scrape();
    const phaseStartAt = Date.now();
    const end = phaseStartAt + params.SCALE_MINUTES * 60_000;
    const cursor = { next: 0 };
    let skipped = 0;
    let lastReport = Date.now();
    while (Date.now() < end && !aborted) {
      const tick = Date.now();
      settleHandovers(tick);
      if (!(await startHandover(cursor))) skipped++;
      if (Date.now() - lastReport >= 30_000) {
        lastReport = Date.now();
        const released = handovers.flatMap((h) => h.leases).filter((l) => l.releasedAt !== undefined).length;
        say(`  ${handovers.length} handovers, ${released} leases released, ${renewals} renewals`);
      }
      await sleep(tick + params.SCALE_HANDOVER_INTERVAL_MS - Date.now());
    }
    const phaseEndAt = Date.now();
    const phaseEnd = await scrape();
    phase = 'drain';
    await waitFor(
      'the last releases',
      RELEASE_TIMEOUT_MS + 5_000,
      () => {
        settleHandovers(Date.now());
        return pendingByPod.size === 0;
      },
      250,
    ).catch(() => undefined);
    report({ idle, phaseStart, phaseEnd, phaseStartAt, phaseEndAt, skipped });
  } finally {
    clearInterval(sampler);
    clearInterval(renewTimer);
    pods.stop();
    leases.stop();
    if (params.SCALE_KEEP === '1') say('SCALE_KEEP=1: leaving the bench namespaces and ClusterCSIDrivers in place');
    else await cleanUp();
  }
}

function report(r: {
  idle?: MetricsSample;
  phaseStart?: MetricsSample;
  phaseEnd?: MetricsSample;
  phaseStartAt: number;
  phaseEndAt: number;
  skipped: number;
}): void {
  const releases = handovers.flatMap((h) => h.leases.map((l) => ({ h, l })));
  const released = releases.filter(({ l }) => l.releasedAt !== undefined);
  const deathOf = (h: HandoverRun) => Math.min(h.terminatedAt ?? Infinity, h.goneAt ?? Infinity);
  const deathToRelease = released.map(({ h, l }) => (l.releasedAt ?? 0) - deathOf(h)).filter(Number.isFinite);
  const deleteToRelease = released.map(({ h, l }) => (l.releasedAt ?? 0) - h.deleteAt);
  const p50 = percentile(deathToRelease, 50);
  const p99 = percentile(deathToRelease, 99);

  const inPhase = samples.filter((s) => s.phase === 'handovers' && s.rssBytes !== undefined);
  const series = (bytes: (s: MetricsSample) => number | undefined) => {
    const points: Point[] = inPhase.flatMap((s) => {
      const b = bytes(s);
      return b === undefined ? [] : [{ t: s.t, v: b / MiB }];
    });
    const perMs = slope(points);
    return {
      points,
      max: points.length ? Math.max(...points.map((p) => p.v)) : undefined,
      per10Min: perMs === undefined ? undefined : perMs * 600_000,
      thirds: thirds(points),
    };
  };
  const rss = series((s) => s.rssBytes);
  // After every cache TTL (pod tombstones live 10 minutes): the caches are full, what grows then is not warm-up.
  const afterTtl = rss.points.filter((p) => p.t >= r.phaseStartAt + 10 * 60_000);
  const rssTrendAfterTtl = afterTtl.length >= 30 ? (slope(afterTtl) ?? NaN) * 600_000 : undefined;
  const heap = series((s) => s.heapUsedBytes);
  const heapTotal = series((s) => s.heapTotalBytes);
  const external = series((s) => s.externalBytes);
  const idleRss = r.idle?.rssBytes;
  const cpuIntervals = inPhase
    .slice(1)
    .map((s, i) => {
      const prev = inPhase[i];
      return prev && s.cpuSeconds !== undefined && prev.cpuSeconds !== undefined && s.leader === prev.leader
        ? (100 * (s.cpuSeconds - prev.cpuSeconds)) / ((s.t - prev.t) / 1000)
        : undefined;
    })
    .filter((v): v is number => v !== undefined);
  const sameLeader = r.phaseStart && r.phaseEnd && r.phaseStart.leader === r.phaseEnd.leader;
  const cpuMean =
    sameLeader && r.phaseStart?.cpuSeconds !== undefined && r.phaseEnd?.cpuSeconds !== undefined
      ? (100 * (r.phaseEnd.cpuSeconds - r.phaseStart.cpuSeconds)) / ((r.phaseEnd.t - r.phaseStart.t) / 1000)
      : undefined;
  const requests =
    sameLeader && r.phaseStart?.apiRequests !== undefined && r.phaseEnd?.apiRequests !== undefined
      ? r.phaseEnd.apiRequests - r.phaseStart.apiRequests
      : undefined;
  const perHandover = requests !== undefined && handovers.length > 0 ? requests / handovers.length : undefined;
  const perLease = requests !== undefined && released.length > 0 ? requests / released.length : undefined;
  // The operator's own lease is renewed on a clock (every retry period), as often with no handover at all: it is a
  // cost per minute, told apart; the target is on what the handovers cause.
  const ownLease =
    requests !== undefined && r.phaseStart?.leaderElectionRequests !== undefined && r.phaseEnd?.leaderElectionRequests !== undefined
      ? r.phaseEnd.leaderElectionRequests - r.phaseStart.leaderElectionRequests
      : undefined;
  const work = requests !== undefined && ownLease !== undefined ? requests - ownLease : undefined;
  const workPerHandover = work !== undefined && handovers.length > 0 ? work / handovers.length : undefined;
  const workPerLease = work !== undefined && released.length > 0 ? work / released.length : undefined;
  const phaseMinutes = (r.phaseEndAt - r.phaseStartAt) / 60_000;
  const breakdown = Object.entries(r.phaseEnd?.requestsBy ?? {})
    .map(([k, v]) => [k, v - (r.phaseStart?.requestsBy?.[k] ?? 0)] as const)
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1]);
  const requestsNote =
    r.phaseEnd?.apiRequests === undefined
      ? 'n/a (the operator exports no csi_handover_api_requests_total)'
      : !sameLeader
        ? 'n/a (the operator leader changed during the run)'
        : undefined;

  const verdict = (ok: boolean | undefined, why: string) => (ok === undefined ? 'n/a' : ok ? 'met' : `MISSED (${why})`);
  const mib = (v: number | undefined) => (v === undefined ? 'n/a' : `${v.toFixed(1)} MiB`);
  const sign = (v: number) => `${v >= 0 ? '+' : ''}${v.toFixed(1)}`;
  const growthVerdict = (v: number | undefined, unit: string) =>
    verdict(v === undefined ? undefined : v <= TARGETS.growthMiBPer10Min, `grows > ${TARGETS.growthMiBPer10Min} MiB${unit}`);
  const heapFloorGrowth = heap.thirds ? heap.thirds.last.min - heap.thirds.first.min : undefined;
  const rows: [string, string, string][] = [
    ['operator RSS when the run started', fmtMiB(idleRss), ''],
    ['operator RSS, max in handover phase', mib(rss.max), verdict(rss.max === undefined ? undefined : rss.max <= TARGETS.rssMiB, `> ${TARGETS.rssMiB} MiB`)],
    ['operator RSS trend (least squares)', rss.per10Min === undefined ? 'n/a' : `${sign(rss.per10Min)} MiB / 10 min`, growthVerdict(rss.per10Min, ' / 10 min')],
    [
      'operator RSS trend after the first 10 min',
      rssTrendAfterTtl === undefined ? 'n/a (a run of 15 min or more tells)' : `${sign(rssTrendAfterTtl)} MiB / 10 min`,
      '',
    ],
    ['operator RSS, first → last third (mean)', rss.thirds ? `${rss.thirds.first.mean.toFixed(1)} → ${rss.thirds.last.mean.toFixed(1)} MiB` : 'n/a', ''],
    ['operator V8 heap used, max in handover phase', mib(heap.max), ''],
    ['operator V8 heap reserved / external memory, max', `${mib(heapTotal.max)} / ${mib(external.max)}`, ''],
    [
      'operator V8 heap used floor, first → last third (min)',
      heap.thirds ? `${heap.thirds.first.min.toFixed(1)} → ${heap.thirds.last.min.toFixed(1)} MiB` : 'n/a',
      growthVerdict(heapFloorGrowth, ' over the run'),
    ],
    [
      'operator CPU, mean / max interval',
      cpuMean === undefined ? 'n/a' : `${cpuMean.toFixed(1)}% / ${Math.max(...cpuIntervals, 0).toFixed(1)}% of a core`,
      verdict(cpuMean === undefined ? undefined : cpuMean <= TARGETS.cpuMeanPercent, `mean > ${TARGETS.cpuMeanPercent}%`),
    ],
    ['handovers (driver pods deleted)', `${handovers.length}`, ''],
    [
      'leases released / not released in 30s',
      `${released.length} / ${releases.length - released.length}`,
      releases.length === 0 ? 'MISSED (no handover)' : released.length === releases.length ? '' : `MISSED (${releases.length - released.length} not released)`,
    ],
    ['death → release p50', fmtMs(p50), ''],
    ['death → release p99', fmtMs(p99), verdict(p99 === undefined ? undefined : p99 <= TARGETS.p99Ms, `> ${TARGETS.p99Ms} ms`)],
    ['death → release max', fmtMs(percentile(deathToRelease, 100)), ''],
    ['pod delete request → release p50 / p99', `${fmtMs(percentile(deleteToRelease, 50))} / ${fmtMs(percentile(deleteToRelease, 99))}`, ''],
    ['API requests per handover, all (per lease released)', requestsNote ?? `${perHandover?.toFixed(1)} (${perLease?.toFixed(1)})`, ''],
    [
      '  of them the operator renewing its own lease',
      requestsNote ??
        (ownLease === undefined
          ? 'n/a (the operator does not tell its callers apart)'
          : `${ownLease} in ${phaseMinutes.toFixed(1)} min (${(ownLease / phaseMinutes).toFixed(1)} a minute)`),
      '',
    ],
    [
      'API requests the handovers cause, per handover (per lease)',
      requestsNote ?? (workPerHandover === undefined ? 'n/a' : `${workPerHandover.toFixed(2)} (${workPerLease?.toFixed(2)})`),
      verdict(workPerHandover === undefined ? undefined : workPerHandover <= TARGETS.requestsPerHandover, `> ${TARGETS.requestsPerHandover}`),
    ],
  ];
  const w0 = Math.max(...rows.map((x) => x[0].length));
  const w1 = Math.max(...rows.map((x) => x[1].length));
  console.log(
    `\n== bench-scale: ${P} pods, ${params.SCALE_LEASES} leases, ${N} namespaces, ${((r.phaseEndAt - r.phaseStartAt) / 60_000).toFixed(1)} min of handovers`,
  );
  for (const [k, v, t] of rows) console.log(`  ${k.padEnd(w0)}  ${v.padEnd(w1)}  ${t}`);
  if (breakdown.length && requests !== undefined) {
    console.log(
      `  API requests of the work in the handover phase (${work ?? requests}), by verb and resource: ${breakdown
        .slice(0, 8)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  }
  console.log(`  death = first sight of every container terminated (deleting) or of the pod gone; release = first sight of holderIdentity "" (bench watches).`);
  console.log('  RSS includes the heap room V8 keeps between major collections; the heap floor (what survives them) is the leak signal.');
  if (params.SCALE_MINUTES < 10) console.log('  note: a trend over less than 10 minutes says little.');
  if (r.skipped) console.log(`  note: ${r.skipped} handover slot(s) skipped (no settled namespace).`);
  if (acquireErrors) console.log(`  note: ${acquireErrors} acquisition(s) by the bench failed (see the log).`);

  const out = join(localDir, 'bench');
  mkdirSync(out, { recursive: true });
  writeFileSync(
    join(out, 'scale.json'),
    JSON.stringify(
      {
        measuredAt: new Date().toISOString(),
        params,
        targets: TARGETS,
        summary: {
          handovers: handovers.length,
          leasesReleased: released.length,
          leasesNotReleased: releases.length - released.length,
          deathToReleaseMs: { p50, p99, max: percentile(deathToRelease, 100), count: deathToRelease.length },
          deleteToReleaseMs: { p50: percentile(deleteToRelease, 50), p99: percentile(deleteToRelease, 99) },
          rssMiB: {
            atStart: idleRss === undefined ? undefined : idleRss / MiB,
            max: rss.max,
            firstThird: rss.thirds?.first,
            lastThird: rss.thirds?.last,
            trendPer10Min: rss.per10Min,
            trendPer10MinAfterFirst10: rssTrendAfterTtl,
          },
          heapUsedMiB: { max: heap.max, firstThird: heap.thirds?.first, lastThird: heap.thirds?.last, trendPer10Min: heap.per10Min },
          heapTotalMiB: { max: heapTotal.max, firstThird: heapTotal.thirds?.first, lastThird: heapTotal.thirds?.last },
          externalMiB: { max: external.max },
          cpuPercentOfCore: { mean: cpuMean, maxInterval: cpuIntervals.length ? Math.max(...cpuIntervals) : undefined },
          apiRequests: {
            total: requests,
            perHandover,
            perLeaseReleased: perLease,
            ownLeaseRenewals: ownLease,
            work,
            workPerHandover,
            workPerLeaseReleased: workPerLease,
            byVerbResource: Object.fromEntries(breakdown),
            note: requestsNote,
          },
          renewals,
        },
        samples: samples.map((s) => ({ ...s, requestsBy: undefined })),
        handovers,
      },
      null,
      2,
    ),
  );
  console.log(`results written to ${join(out, 'scale.json')}`);
}

await main();
// The watches and timers are stopped; the HTTP agent may hold sockets open.
process.exit(0);
