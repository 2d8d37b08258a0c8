// One work queue per controller, made here so every controller's reconciles are measured the same way:
// duration, outcome and queue depth as metrics, and a failure as one warning with the retry delay.
import type { Logger } from 'pino';
import { type ReconcileResult, WorkQueue } from '../kube/workqueue.js';
import type { Metrics } from '../metrics.js';

export type ControllerName = 'clustercsidriver' | 'handover' | 'webhook';

export interface ControllerQueueOptions<K> {
  controller: ControllerName;
  metrics: Metrics;
  log: Logger;
  reconcile: (key: K, signal: AbortSignal) => Promise<ReconcileResult>;
  /** What names a key in ids and logs. */
  id: (key: K) => string;
  concurrency?: number;
  backoff?: { baseMs: number; maxMs: number };
}

export function controllerQueue<K>(o: ControllerQueueOptions<K>): WorkQueue<K> {
  const controller = o.controller;
  return new WorkQueue<K>({
    name: controller,
    reconcile: o.reconcile,
    id: o.id,
    concurrency: o.concurrency,
    backoff: o.backoff,
    onError: (key, err, retryInMs) => {
      o.metrics.reconcileErrors.inc({ controller });
      o.log.warn({ key: o.id(key), err: String(err), retryInMs }, 'reconcile failed; retrying with backoff');
    },
    onDone: (_key, durationMs, outcome) => {
      o.metrics.reconciles.inc({ controller, outcome });
      o.metrics.reconcileDuration.observe({ controller }, durationMs / 1000);
    },
    onDepth: (depth) => o.metrics.queueDepth.set({ queue: controller }, depth),
  });
}
