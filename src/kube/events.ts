// Kubernetes Events (core/v1) for what the operator did, on the object it concerns. Best effort: an Event
// that cannot be written is logged, never retried at the expense of real work.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { KubeHttp } from './http.js';

export interface EventTarget {
  apiVersion: string;
  kind: string;
  name: string;
  /** empty for cluster-scoped objects; their Events go to the "default" namespace */
  namespace?: string;
  uid?: string;
}

export class EventRecorder {
  constructor(
    private readonly http: KubeHttp,
    private readonly log: Logger,
    private readonly instance: string,
  ) {}

  async emit(target: EventTarget, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const ns = target.namespace || 'default';
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const body = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: `${target.name}.${randomBytes(8).toString('hex')}`, namespace: ns },
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
    };
    try {
      await this.http.request('POST', `/api/v1/namespaces/${ns}/events`, { body });
    } catch (err) {
      this.log.warn({ err: String(err), reason, object: `${target.kind}/${target.name}` }, 'could not record event');
    }
  }
}
