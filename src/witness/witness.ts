// The node witness: watches the leaders on its node (pods with the operator's leader deletion cost); while one
// is in a graceful deletion, reads its container cgroups every few milliseconds and, the moment no container has
// a process left, writes that on the pod as a condition of our own. The operator trusts it in place of the
// kubelet's report, which comes only after the sandbox is stopped too (kubernetes#106896).
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { podRef } from '../handover/observed-pod.js';
import { witnessCondition } from '../handover/witness-evidence.js';
import { microTime } from '../leaderelection/lease-record.js';
import { refusalOf } from '../kube/errors.js';
import { type KubeHttp, PatchType } from '../kube/http.js';
import { Informer, keyOf, withoutManagedFields } from '../kube/informer.js';
import { type CgroupLayout, kindKey, readPodCgroup } from './cgroups.js';
import { judge, type Judgement, wantsWitness } from './judge.js';
import { bundleKind, type CgroupKind } from './runtime.js';
import type { WitnessMetrics } from './metrics.js';
import type { OperatorChannel } from './report.js';

export interface WitnessOptions {
  node: string;
  layout: CgroupLayout;
  bundleTemplates: readonly string[];
  pollMs: number;
  leaderCost: string;
  /** Where the evidence is also sent straight to the operator (src/witness/report.ts); without it, the condition only. */
  channel?: Pick<OperatorChannel, 'hello' | 'report'>;
  now?: () => number;
}

interface Watched {
  pod: V1Pod;
  since: number;
  lastWhy?: string;
  /** What each child's bundle said (by kindKey): it never changes, and reading and parsing it every sweep costs CPU the node needs then. */
  kinds: Map<string, CgroupKind>;
  writing?: boolean;
  /** Every container seen exited (kept: a later sweep may find the cgroups gone). */
  proven?: Proven;
  /** Sent to the operator already (once: the condition follows either way). */
  reported?: boolean;
  /** After a failed write: not before this time (ms), and how many failed in a row. */
  retryAt?: number;
  failures?: number;
}

type Proven = Extract<Judgement, { proven: true }>;

/** The node's pods as the witness follows them: an informer in the witness, anything that emits pods in a test. */
export type PodSource = Pick<Informer<V1Pod>, 'on' | 'start' | 'stop' | 'hasSynced'>;

/** The pods of one node, from a watch of the API server. */
export function nodePods(http: KubeHttp, node: string, log: Logger): PodSource {
  return new Informer<V1Pod>(http, { path: '/api/v1/pods', fieldSelector: `spec.nodeName=${node}`, log, transform: withoutManagedFields });
}

const RETRY = { initialMs: 100, maxMs: 5_000 };

/**
 * Pod `uid`'s cgroups as the kernel has them now, judged. `kinds` (by kindKey) keeps what bundles said for good: a
 * container id's bundle never changes. An unknown (no bundle yet, unreadable) is asked again next sweep.
 */
export async function judgePodCgroups(
  opts: Pick<WitnessOptions, 'layout' | 'bundleTemplates'>,
  uid: string,
  kinds: Map<string, CgroupKind>,
  now: () => number,
): Promise<Judgement> {
  try {
    const reading = readPodCgroup(opts.layout, uid, now);
    if (reading.found) {
      for (const c of reading.children.filter((x) => x.tasks > 0 && !kinds.has(kindKey(x)))) {
        const kind = await bundleKind(opts.bundleTemplates, c.id, uid, c.role);
        if (kind) kinds.set(kindKey(c), kind);
      }
    }
    return judge(reading, kinds);
  } catch (err) {
    return { proven: false, why: `cannot read its cgroups: ${String(err)}` };
  }
}

export class Witness {
  private readonly watched = new Map<string, Watched>();
  /** The pods (uid) whose evidence this witness wrote, or the API server refused: not watched again until deleted. */
  private readonly done = new Set<string>();
  /** Sweeps run only while a leader is being deleted: an idle witness wakes for nothing but its watch. */
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private polling = false;
  private readonly now: () => number;

  constructor(
    private readonly http: Pick<KubeHttp, 'patch'>,
    private readonly opts: WitnessOptions,
    private readonly log: Logger,
    private readonly metrics: WitnessMetrics,
    private readonly pods: PodSource,
  ) {
    this.now = opts.now ?? Date.now;
    const seen = (pod: V1Pod) => this.seen(pod);
    this.pods.on('add', seen).on('update', seen);
    this.pods.on('delete', (pod) => {
      this.done.delete(pod.metadata?.uid ?? '');
      this.forget(keyOf(pod));
    });
  }

  start(): void {
    this.started = true;
    this.pods.start();
    this.sweepWhileWatching();
  }

  stop(): void {
    this.started = false;
    this.sweepWhileWatching();
    this.pods.stop();
  }

  hasSynced(): boolean {
    return this.pods.hasSynced();
  }

  private seen(pod: V1Pod): void {
    const key = keyOf(pod);
    if (!wantsWitness(pod, this.opts.leaderCost) || this.done.has(pod.metadata?.uid ?? '')) return this.forget(key);
    const w = this.watched.get(key);
    if (w && w.pod.metadata?.uid === pod.metadata?.uid) w.pod = pod;
    else {
      this.watched.set(key, { pod, since: this.now(), kinds: new Map() });
      this.opts.channel?.hello(this.now());
    }
    this.metrics.watching.set(this.watched.size);
    this.sweepWhileWatching();
  }

  /** Written, or refused for good: not watched again until the pod is deleted. */
  private finished(key: string, w: Watched): void {
    this.done.add(w.pod.metadata?.uid ?? '');
    this.forget(key);
  }

  private forget(key: string): void {
    if (this.watched.delete(key)) this.metrics.watching.set(this.watched.size);
    this.sweepWhileWatching();
  }

  private sweepWhileWatching(): void {
    const want = this.started && this.watched.size > 0;
    if (want && this.timer === undefined) this.timer = setInterval(() => void this.poll(), this.opts.pollMs);
    if (!want && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  /** One sweep over the pods being deleted; a sweep still running (a slow filesystem) is not overlapped. */
  private async poll(): Promise<void> {
    if (this.polling || this.watched.size === 0) return;
    this.polling = true;
    try {
      await Promise.all([...this.watched].map(([key, w]) => this.look(key, w)));
    } finally {
      this.polling = false;
    }
  }

  /**
   * Straight to the operator, beside the condition (not instead: the condition is the record, and what a replica
   * that missed the report reads); both at once, so a report that does not arrive delays nothing.
   */
  private async report(w: Watched, v: Proven): Promise<void> {
    const channel = this.opts.channel;
    if (!channel) return;
    const meta = w.pod.metadata ?? {};
    const sentAt = this.now();
    const result = await channel.report({
      namespace: meta.namespace ?? '',
      name: meta.name ?? '',
      uid: meta.uid ?? '',
      node: this.opts.node,
      exitedBy: microTime(v.exitedBy),
      detail: v.detail,
    });
    this.metrics.reports.inc({ result });
    this.log.info({ pod: podRef(w.pod), result, ms: this.now() - sentAt }, 'reported to the operator');
  }

  /** The pod's cgroups as the kernel has them now, judged. */
  private read(w: Watched): Promise<Judgement> {
    return judgePodCgroups(this.opts, w.pod.metadata?.uid ?? '', w.kinds, this.now);
  }

  private async look(key: string, w: Watched): Promise<void> {
    if (w.writing || (w.retryAt ?? 0) > this.now()) return;
    // What was proven stays proven (a statement about an instant): a later sweep may find the cgroups removed.
    const verdict = w.proven ?? (await this.read(w));
    if (!verdict.proven) {
      if (verdict.why !== w.lastWhy) this.log.debug({ pod: key, why: verdict.why }, 'not yet');
      w.lastWhy = verdict.why;
      return;
    }
    w.proven = verdict;
    w.writing = true;
    if (!w.reported) {
      w.reported = true;
      void this.report(w, verdict);
    }
    // Not awaited: a sweep covers every leader being deleted on the node, and a status write can take a second on
    // a busy API server. Awaited, one pod's write held up the sweeps of the others (seen: a snapshot-controller's
    // exit proven 0.8 s late, behind its node neighbour's write). `writing` keeps this pod from being written twice.
    void this.writeCondition(key, w, verdict).finally(() => {
      w.writing = false;
    });
  }

  private async writeCondition(key: string, w: Watched, verdict: Proven): Promise<void> {
    const condition = witnessCondition({ exitedBy: verdict.exitedBy, node: this.opts.node }, verdict.detail, this.now());
    const path = `/api/v1/namespaces/${w.pod.metadata?.namespace ?? ''}/pods/${w.pod.metadata?.name ?? ''}/status`;
    try {
      // The uid is a precondition: a re-created pod of the same name is another pod.
      await this.http.patch(path, { metadata: { uid: w.pod.metadata?.uid ?? '' }, status: { conditions: [condition] } }, PatchType.strategic);
      this.metrics.evidence.inc({ result: 'written' });
      this.metrics.latency.observe((verdict.exitedBy - w.since) / 1000);
      this.log.info({ pod: podRef(w.pod), exitedBy: new Date(verdict.exitedBy).toISOString(), detail: verdict.detail }, 'every container exited');
      this.finished(key, w);
    } catch (err) {
      const refusal = refusalOf(err);
      this.metrics.evidence.inc({ result: refusal ?? 'error' });
      // Gone, replaced or refused (the admission policy): nothing to write; anything else is tried again later.
      if (refusal !== undefined) {
        this.log.warn({ pod: podRef(w.pod), refusal, err: String(err) }, 'evidence not written');
        this.finished(key, w);
      } else {
        w.failures = (w.failures ?? 0) + 1;
        w.retryAt = this.now() + Math.min(RETRY.maxMs, RETRY.initialMs * 2 ** (w.failures - 1));
        this.log.warn({ pod: podRef(w.pod), err: String(err), failures: w.failures }, 'writing evidence failed; retrying with backoff');
      }
    }
  }
}
