// Keeps real work flowing to every leader-elected sidecar through a rollout and times each operation from
// submit to done: a new PVC bound (csi-provisioner), a VolumeAttachment attached (csi-attacher), a PVC grown
// to its new capacity (csi-resizer), a VolumeSnapshot readyToUse (csi-snapshotter + snapshot-controller).
// Completion is seen through watches, so each "done" is the moment the API showed it. Everything the probe
// creates lives in its own namespace or carries its label, and `cleanup` proves it is all gone.
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type KubeHttp, PatchType } from '../../src/kube/http.js';
import { isNotFound } from '../../src/kube/errors.js';
import { Informer } from '../../src/kube/informer.js';
import { SAMPLE_DRIVER, type SampleOverlay, waitFor } from '../lib/cluster.js';
import { measureHandovers, type RolloutResult } from './measure-rollout.js';
import { type ProbeKind, type ProbeKindStats, type ProbeOp, probeStats } from '../../src/report/probe-stats.js';

const STORAGE_CLASS = 'csi-hostpath-sc';
const SNAPSHOT_CLASS = 'csi-hostpath-snapclass';
const PROBE_LABEL = 'csi-handover.io/probe';
/** Per kind: submitting stops while this many are pending (a stall of minutes at 1/s stays bounded). */
const MAX_PENDING = 400;

interface Pvc extends KubernetesObject {
  spec?: { volumeName?: string; resources?: { requests?: { storage?: string } } };
  status?: { phase?: string; capacity?: { storage?: string } };
}
interface VolumeAttachment extends KubernetesObject {
  status?: { attached?: boolean };
}
interface VolumeSnapshot extends KubernetesObject {
  status?: { readyToUse?: boolean };
}
interface Pv extends KubernetesObject {
  spec?: { claimRef?: { namespace?: string } };
}
interface SnapshotContent extends KubernetesObject {
  spec?: { volumeSnapshotRef?: { namespace?: string } };
}

const gi = (q: string | undefined): number => {
  const m = /^(\d+)Gi$/.exec(q ?? '');
  return m ? Number(m[1]) : 0;
};

/** Probes with objects in the cluster: an interrupt (Ctrl-C) removes them before the process exits. */
const active = new Set<StorageProbe>();
let signalsHandled = false;
function cleanUpOnInterrupt(): void {
  if (signalsHandled) return;
  signalsHandled = true;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`${signal}: removing the storage probe's objects first`);
      void Promise.allSettled([...active].map((p) => p.cleanup(120_000))).finally(() => process.exit(130));
    });
  }
}

export interface StorageProbeOptions {
  /** Submit a PVC, an attachment and a resize once per interval; a snapshot every `snapshotEvery` intervals. */
  intervalMs?: number;
  snapshotEvery?: number;
  /** Volumes provisioned beforehand as attach/snapshot sources and resize targets. */
  poolSize?: number;
  /** How long `stop` waits for pending operations once the rollout is over. */
  drainTimeoutMs?: number;
}

export class StorageProbe {
  readonly ops: ProbeOp[] = [];
  readonly namespace: string;
  private readonly pending = new Map<string, ProbeOp>(); // `${kind}/${name}` → op
  private readonly resizeWanted = new Map<string, number>(); // pool PVC → Gi asked for while pending
  private readonly informers: Informer<KubernetesObject>[] = [];
  private readonly pool: { pvc: string; pv: string; gi: number }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private seq = 0;
  private ticks = 0;
  private submitting: Promise<unknown>[] = [];
  /** when submitting stopped, and when the last operation finished or the drain gave up */
  stoppedAt: number | undefined;
  endedAt: number | undefined;

  constructor(
    private readonly http: KubeHttp,
    private readonly log: Logger,
    private readonly runId: string,
    private readonly opts: StorageProbeOptions = {},
  ) {
    this.namespace = `csi-handover-probe-${runId}`;
  }

  /** Creates the namespace and a pool of bound volumes, and starts watching; the rollout has not begun. */
  async prepare(): Promise<void> {
    active.add(this);
    cleanUpOnInterrupt();
    await this.http.request('POST', '/api/v1/namespaces', {
      body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: this.namespace, labels: { [PROBE_LABEL]: this.runId } } },
    });
    const size = this.opts.poolSize ?? 4;
    for (let i = 0; i < size; i++) await this.createPvc(`pool-${i}`);
    for (let i = 0; i < size; i++) {
      const name = `pool-${i}`;
      const pvc = await waitFor(
        `probe pool volume ${name} bound`,
        600_000,
        async () => {
          const p = await this.http.get<Pvc>(`${this.pvcPath()}/${name}`);
          return p.status?.phase === 'Bound' && p.spec?.volumeName ? p : undefined;
        },
        250,
      );
      this.pool.push({ pvc: name, pv: pvc.spec?.volumeName ?? '', gi: gi(pvc.status?.capacity?.storage) || 1 });
    }
    const ns = this.namespace;
    const watch = <T extends KubernetesObject>(path: string, done: (o: T) => string | undefined, labelSelector?: string) => {
      const inf = new Informer<T>(this.http, { path, log: this.log, labelSelector });
      const seen = (o: T) => {
        const key = done(o);
        if (key) this.completed(key);
      };
      inf.on('add', seen).on('update', seen);
      this.informers.push(inf as unknown as Informer<KubernetesObject>);
      return inf;
    };
    watch<Pvc>(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, (p) => {
      const name = p.metadata?.name ?? '';
      if (name.startsWith('pool-')) {
        const want = this.resizeWanted.get(name);
        return want !== undefined && gi(p.status?.capacity?.storage) >= want ? `resize/${name}` : undefined;
      }
      return p.status?.phase === 'Bound' ? `provision/${name}` : undefined;
    });
    watch<VolumeAttachment>(
      '/apis/storage.k8s.io/v1/volumeattachments',
      (v) => (v.status?.attached ? `attach/${v.metadata?.name ?? ''}` : undefined),
      `${PROBE_LABEL}=${this.runId}`,
    );
    watch<VolumeSnapshot>(`/apis/snapshot.storage.k8s.io/v1/namespaces/${ns}/volumesnapshots`, (s) =>
      s.status?.readyToUse ? `snapshot/${s.metadata?.name ?? ''}` : undefined,
    );
    for (const inf of this.informers) inf.start();
    await Promise.all(this.informers.map((inf) => inf.waitForSync()));
  }

  /** Starts submitting one operation of each kind per interval. */
  async start(): Promise<void> {
    // Snapshots are sparser: snapshot-controller makes several writes per snapshot (content, finalizers,
    // statuses) under client-go's default client-side rate limit, so one per second measured that limit's
    // queue ("client-side throttling" in its log; steady-state waits of 6–21s), not the handover.
    const snapshotEvery = this.opts.snapshotEvery ?? 4;
    const tick = () => {
      const ops = [this.provision(), this.attach(), this.resize()];
      if (this.ticks++ % snapshotEvery === 0) ops.push(this.snapshot());
      this.submitting = this.submitting.concat(ops);
    };
    tick();
    this.timer = setInterval(tick, this.opts.intervalMs ?? 1000);
  }

  /** The rollout starts now: a snapshot goes in at once (and the sparser snapshot cadence restarts from here). */
  markTrigger(): number {
    this.ticks = 1;
    const at = Date.now();
    this.submitting.push(this.snapshot());
    return at;
  }

  /** Stops submitting and waits (bounded) for every pending operation to finish. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.stoppedAt = Date.now();
    await Promise.allSettled(this.submitting);
    await waitFor('probe operations finished', this.opts.drainTimeoutMs ?? 300_000, () => this.pending.size === 0, 250).catch((err: unknown) => {
      this.log.warn({ err: String(err), pending: [...this.pending.keys()] }, 'probe operations still pending');
    });
    this.endedAt = Date.now();
    for (const inf of this.informers) inf.stop();
  }

  /** Deletes everything the probe created and waits until none of it — nor a volume or snapshot content — is left. */
  async cleanup(timeoutMs = 600_000): Promise<void> {
    for (const inf of this.informers) inf.stop();
    const selector = `${PROBE_LABEL}=${this.runId}`;
    // Attachments first: the attacher detaches them (removing its finalizer) while the volumes still exist.
    await this.http.request('DELETE', '/apis/storage.k8s.io/v1/volumeattachments', { query: { labelSelector: selector } });
    await this.http.request('DELETE', `/api/v1/namespaces/${this.namespace}`).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    });
    const left = await waitFor(
      `probe ${this.runId} cleaned up`,
      timeoutMs,
      async () => {
        const remaining = await this.leftovers();
        return remaining.length === 0 ? remaining : undefined;
      },
      1000,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; left: ${(await this.leftovers()).join(', ')}`);
    });
    active.delete(this);
    this.log.info({ runId: this.runId, left: left.length }, 'probe cleaned up');
  }

  /** What of the probe's still exists: its attachments, namespace, volumes and snapshot contents. */
  async leftovers(): Promise<string[]> {
    const ns = this.namespace;
    const vas = await this.http.get<{ items: KubernetesObject[] }>('/apis/storage.k8s.io/v1/volumeattachments', {
      labelSelector: `${PROBE_LABEL}=${this.runId}`,
    });
    const pvs = await this.http.get<{ items: Pv[] }>('/api/v1/persistentvolumes');
    const contents = await this.http.get<{ items: SnapshotContent[] }>('/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents');
    const nsLeft = await this.http.get(`/api/v1/namespaces/${ns}`).then(
      () => [`namespace/${ns}`],
      (err: unknown) => {
        if (isNotFound(err)) return [];
        throw err;
      },
    );
    return [
      ...vas.items.map((v) => `volumeattachment/${v.metadata?.name}`),
      ...nsLeft,
      ...pvs.items.filter((p) => p.spec?.claimRef?.namespace === ns).map((p) => `persistentvolume/${p.metadata?.name}`),
      ...contents.items.filter((c) => c.spec?.volumeSnapshotRef?.namespace === ns).map((c) => `volumesnapshotcontent/${c.metadata?.name}`),
    ];
  }

  // ---- operations ----

  private pvcPath(): string {
    return `/api/v1/namespaces/${this.namespace}/persistentvolumeclaims`;
  }

  private createPvc(name: string): Promise<unknown> {
    return this.http.request('POST', this.pvcPath(), {
      body: {
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name },
        spec: { accessModes: ['ReadWriteOnce'], storageClassName: STORAGE_CLASS, resources: { requests: { storage: '1Gi' } } },
      },
    });
  }

  private pendingOf(kind: ProbeKind): number {
    let n = 0;
    for (const op of this.pending.values()) if (op.kind === kind) n++;
    return n;
  }

  /** Records the op as submitted, then makes the request; a failed request is logged and not counted. */
  private async submit(kind: ProbeKind, name: string, request: () => Promise<unknown>, key = `${kind}/${name}`): Promise<void> {
    if (this.pendingOf(kind) >= MAX_PENDING) return;
    const op: ProbeOp = { kind, name, submittedAt: Date.now() };
    this.pending.set(key, op);
    try {
      await request();
      this.ops.push(op);
    } catch (err) {
      this.pending.delete(key);
      this.log.warn({ kind, name, err: String(err) }, 'probe operation not submitted');
    }
  }

  private completed(key: string): void {
    const op = this.pending.get(key);
    if (!op) return;
    op.doneAt = Date.now();
    this.pending.delete(key);
    if (op.kind === 'resize') this.resizeWanted.delete(key.slice('resize/'.length));
  }

  private provision(): Promise<void> {
    const name = `prov-${++this.seq}`;
    return this.submit('provision', name, () => this.createPvc(name));
  }

  private attach(): Promise<void> {
    const n = ++this.seq;
    const source = this.pool[n % this.pool.length];
    if (!source) return Promise.resolve();
    const name = `${this.namespace}-va-${n}`;
    return this.submit('attach', name, () =>
      this.http.request('POST', '/apis/storage.k8s.io/v1/volumeattachments', {
        body: {
          apiVersion: 'storage.k8s.io/v1',
          kind: 'VolumeAttachment',
          metadata: { name, labels: { [PROBE_LABEL]: this.runId } },
          spec: { attacher: SAMPLE_DRIVER, nodeName: 'node-1', source: { persistentVolumeName: source.pv } },
        },
      }),
    );
  }

  /** Grows a pool volume that has no resize in flight by 1Gi (a pending resize is never overtaken). */
  private resize(): Promise<void> {
    const target = this.pool.find((p) => !this.resizeWanted.has(p.pvc));
    if (!target) return Promise.resolve();
    const want = target.gi + 1;
    this.resizeWanted.set(target.pvc, want);
    target.gi = want;
    // Keyed by the PVC (one resize in flight per PVC), named with the size asked for.
    return this.submit(
      'resize',
      `${target.pvc}@${want}Gi`,
      () => this.http.patch(`${this.pvcPath()}/${target.pvc}`, { spec: { resources: { requests: { storage: `${want}Gi` } } } }, PatchType.merge),
      `resize/${target.pvc}`,
    ).finally(() => {
      // Not submitted (the patch failed, or too many pending): free the PVC for the next try.
      if (!this.pending.has(`resize/${target.pvc}`) && !this.ops.some((o) => o.kind === 'resize' && o.name === `${target.pvc}@${want}Gi`)) {
        this.resizeWanted.delete(target.pvc);
        target.gi = want - 1;
      }
    });
  }

  private snapshot(): Promise<void> {
    const n = ++this.seq;
    const source = this.pool[n % this.pool.length];
    if (!source) return Promise.resolve();
    const name = `snap-${n}`;
    return this.submit('snapshot', name, () =>
      this.http.request('POST', `/apis/snapshot.storage.k8s.io/v1/namespaces/${this.namespace}/volumesnapshots`, {
        body: {
          apiVersion: 'snapshot.storage.k8s.io/v1',
          kind: 'VolumeSnapshot',
          metadata: { name },
          spec: { volumeSnapshotClassName: SNAPSHOT_CLASS, source: { persistentVolumeClaimName: source.pvc } },
        },
      }),
    );
  }
}

/**
 * Removes what an interrupted earlier run left: every probe attachment and namespace (both carry the probe
 * label), then waits for their volumes and snapshot contents to go.
 */
export async function removeStaleProbes(http: KubeHttp, log: Logger): Promise<void> {
  const namespaces = await http.get<{ items: KubernetesObject[] }>('/api/v1/namespaces', { labelSelector: PROBE_LABEL });
  const runs = new Set(namespaces.items.map((n) => n.metadata?.labels?.[PROBE_LABEL] ?? ''));
  const vas = await http.get<{ items: KubernetesObject[] }>('/apis/storage.k8s.io/v1/volumeattachments', { labelSelector: PROBE_LABEL });
  for (const v of vas.items) runs.add(v.metadata?.labels?.[PROBE_LABEL] ?? '');
  for (const runId of runs) {
    if (!runId) continue;
    log.warn({ runId }, 'removing what an interrupted probe run left');
    await new StorageProbe(http, log, runId).cleanup();
  }
}

/** The probe runs this long before the trigger: its operations there show each kind's steady-state latency. */
export const PRE_ROLL_MS = 5000;

export interface ProbedRollout {
  rollout: RolloutResult;
  /** per kind: waits over the operations submitted from the trigger on, the stall over all of them */
  stats: ProbeKindStats[];
  /** per kind, the longest wait of an operation submitted in the pre-roll, before the trigger */
  steadyWaitMs: Record<string, number>;
  ops: ProbeOp[];
  /** when the last operation finished (or the drain gave up) */
  endedAt: number;
}

/**
 * One measured rollout (measureHandovers) with the storage probe running through it: from PRE_ROLL_MS before
 * the trigger until every lease has a new holder, then drained and cleaned up.
 */
export async function probedRollout(
  http: KubeHttp,
  overlay: SampleOverlay,
  log: Logger,
  runId: string,
  trigger: () => Promise<unknown>,
): Promise<ProbedRollout> {
  const probe = new StorageProbe(http, log, runId);
  await probe.prepare();
  let markedAt: number | undefined;
  try {
    const rollout = await measureHandovers(http, overlay, log, trigger, {
      start: async () => {
        await probe.start();
        await new Promise((r) => setTimeout(r, PRE_ROLL_MS));
        markedAt = probe.markTrigger();
      },
      stop: () => probe.stop(),
    });
    // From the trigger on (the mark is taken just before the trigger itself, with the first snapshot).
    const triggeredAt = Math.min(markedAt ?? Infinity, Date.parse(rollout.startedAt));
    const endedAt = probe.endedAt ?? Date.now();
    // Waits of what was submitted from the trigger on; the stall over everything the probe did, since an
    // operation submitted in the pre-roll that completes during the rollout is progress too.
    const overall = probeStats(probe.ops, endedAt);
    const stats = probeStats(
      probe.ops.filter((o) => o.submittedAt >= triggeredAt),
      endedAt,
    ).map((k) => {
      const all = overall.find((x) => x.kind === k.kind);
      return all ? { ...k, stallMs: all.stallMs, stallFrom: all.stallFrom, stallTo: all.stallTo } : k;
    });
    const steady = probeStats(
      probe.ops.filter((o) => o.submittedAt < triggeredAt),
      triggeredAt,
    );
    return { rollout, stats, steadyWaitMs: Object.fromEntries(steady.map((k) => [k.kind, k.longestWaitMs])), ops: probe.ops, endedAt };
  } finally {
    await probe.cleanup();
  }
}

/** The sidecar each kind of operation waits for. */
export const SIDECAR_OF_KIND: Record<ProbeKind, string> = {
  provision: 'csi-provisioner',
  attach: 'csi-attacher',
  resize: 'csi-resizer',
  snapshot: 'csi-snapshotter',
};
