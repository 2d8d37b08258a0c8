// Kubernetes Events (core/v1) for what the operator did, on the object it concerns. Aggregated the way
// client-go's recorder does: a repeat of the same event (object, type, reason, message) bumps the existing
// Event's count and lastTimestamp instead of creating another. Best effort: an Event that cannot be written is
// logged, never retried at the expense of real work.
import { createHash, randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { type Clock, kubeTime, systemClock } from '../clock.js';
import { type KubeHttp, PatchType } from './http.js';
import { isNotFound } from './errors.js';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  name: string;
  /** empty for cluster-scoped objects; their Events go to the "default" namespace */
  namespace?: string;
  uid?: string;
}

// As client-go's maxLruCacheEntries: the repeats we remember.
const REMEMBERED = 4096;

export class EventRecorder {
  /** identical-event key → the Event we wrote and its count, oldest first */
  private readonly written = new Map<string, { name: string; count: number }>();

  constructor(
    private readonly http: KubeHttp,
    private readonly log: Logger,
    private readonly instance: string,
    private readonly now: Clock = systemClock,
  ) {}

  async emit(target: EventTarget, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const ns = target.namespace || 'default';
    const now = kubeTime(this.now());
    // Remembered by digest: messages run to a kilobyte and 4,096 of them would keep megabytes for nothing.
    const key = createHash('sha256')
      .update(JSON.stringify([target.apiVersion, target.kind, ns, target.name, target.uid ?? '', type, reason, message]))
      .digest('base64');
    try {
      const seen = this.written.get(key);
      if (seen) {
        try {
          await this.http.patch(`/api/v1/namespaces/${ns}/events/${seen.name}`, { count: seen.count + 1, lastTimestamp: now }, PatchType.merge);
          this.remember(key, { name: seen.name, count: seen.count + 1 });
          return;
        } catch (err) {
          if (!isNotFound(err)) throw err; // expired (the API server keeps Events an hour): write it anew
        }
      }
      const name = `${target.name}.${randomBytes(8).toString('hex')}`;
      await this.http.request('POST', `/api/v1/namespaces/${ns}/events`, {
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { name, namespace: ns },
          involvedObject: { apiVersion: target.apiVersion, kind: target.kind, name: target.name, namespace: target.namespace || undefined, uid: target.uid },
          type,
          reason,
          message,
          source: { component: 'csi-handover' },
          reportingComponent: 'csi-handover',
          reportingInstance: this.instance,
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
        },
      });
      this.remember(key, { name, count: 1 });
    } catch (err) {
      this.log.warn({ err: String(err), reason, object: `${target.kind}/${target.name}` }, 'could not record event');
    }
  }

  private remember(key: string, e: { name: string; count: number }): void {
    this.written.delete(key); // re-inserted: most recent last
    this.written.set(key, e);
    if (this.written.size > REMEMBERED) this.written.delete(this.written.keys().next().value ?? '');
  }
}
