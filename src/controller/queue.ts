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
  /** What makes two keys one. */
  id: (key: K) => string;
  /** How a key is named in logs (default: `{ key: id }`). */
  logFields?: (key: K) => Record<string, unknown>;
  concurrency?: number;
  backoff?: { baseMs: number; maxMs: number };
}

export function controllerQueue<K>(o: ControllerQueueOptions<K>): WorkQueue<K> {
  const controller = o.controller;
  const fields = o.logFields ?? ((key: K) => ({ key: o.id(key) }));
  return new WorkQueue<K>({
    name: controller,
    // Start and end at debug level: whether two replicas ever reconciled at once can be read from the logs.
    reconcile: async (key, signal) => {
      o.log.debug(fields(key), 'reconcile start');
      try {
        return await o.reconcile(key, signal);
      } finally {
        o.log.debug(fields(key), 'reconcile end');
      }
    },
    id: o.id,
    concurrency: o.concurrency,
    backoff: o.backoff,
    onError: (key, err, retryInMs) => {
      o.metrics.reconcileErrors.inc({ controller });
      o.log.warn({ ...fields(key), err: String(err), retryInMs }, 'reconcile failed; retrying with backoff');
    },
    onDone: (_key, durationMs, outcome) => {
      o.metrics.reconciles.inc({ controller, outcome });
      o.metrics.reconcileDuration.observe({ controller }, durationMs / 1000);
    },
    onDepth: (depth) => o.metrics.queueDepth.set({ queue: controller }, depth),
  });
}
