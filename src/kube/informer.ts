// A list-watch cache that never gives up: it relists on 410 Gone, reconnects from the last resourceVersion
// after any other watch error with capped exponential backoff, and reports whether it has synced.
// client-node's own informer stops on non-410 errors; the operator cannot afford that.
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { KubeApiError, type KubeHttp } from './http.js';

export type InformerEvent = 'add' | 'update' | 'delete';
export type Handler<T> = (obj: T, old?: T) => void;

export interface InformerOptions {
  /** Collection path, e.g. `/api/v1/pods` or `/apis/coordination.k8s.io/v1/namespaces/x/leases`. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  log: Logger;
  /** Backoff after a failed list or watch: initial and maximum delay in ms. */
  backoff?: { initialMs: number; maxMs: number };
  /** Applied to every object before it is cached and handed out, e.g. to drop fields nobody reads. */
  transform?: <O extends KubernetesObject>(obj: O) => O;
}

/**
 * Drops metadata.managedFields — often a third of a Pod's size — from an object only ever read and patched,
 * never written back whole (controller-runtime's TransformStripManagedFields, for the same reason).
 */
export function withoutManagedFields<O extends KubernetesObject>(obj: O): O {
  // Assigned rather than deleted: `delete` turns every cached metadata object into a slow dictionary.
  if (obj.metadata?.managedFields) obj.metadata.managedFields = undefined;
  return obj;
}

export const keyOf = (o: KubernetesObject): string =>
  o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata?.name ?? ''}` : (o.metadata?.name ?? '');

/** What consumers of a cache need: events, lookups by key, and the whole list. */
export interface InformerView<T> {
  on(event: InformerEvent, handler: Handler<T>): this;
  get(key: string): T | undefined;
  list(): T[];
}

export class Informer<T extends KubernetesObject> implements InformerView<T> {
  private readonly cache = new Map<string, T>();
  private readonly handlers: Record<InformerEvent, Handler<T>[]> = { add: [], update: [], delete: [] };
  private readonly syncWaiters: (() => void)[] = [];
  private resourceVersion = '';
  private stopped = true;
  private synced = false;
  private abort: AbortController | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(
    private readonly http: KubeHttp,
    private readonly opts: InformerOptions,
  ) {}

  on(event: InformerEvent, handler: Handler<T>): this {
    this.handlers[event].push(handler);
    return this;
  }

  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves once the first list has been loaded into the cache. */
  waitForSync(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.run();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.abort?.abort();
  }

  private async run(): Promise<void> {
    if (this.stopped) return;
    try {
      if (!this.resourceVersion) await this.relist();
      await this.watch();
    } catch (err) {
      this.scheduleRetry(err);
    }
  }

  private async relist(): Promise<void> {
    const list = await this.http.get<KubernetesListObject<T>>(this.opts.path, {
      labelSelector: this.opts.labelSelector,
      fieldSelector: this.opts.fieldSelector,
    });
    const seen = new Set<string>();
    for (const obj of list.items) {
      const key = keyOf(obj);
      seen.add(key);
      this.store(obj);
    }
    for (const [key, old] of this.cache) {
      if (!seen.has(key)) {
        this.cache.delete(key);
        this.emit('delete', old);
      }
    }
    this.resourceVersion = list.metadata?.resourceVersion ?? '';
    if (!this.synced) {
      this.synced = true;
      for (const resolve of this.syncWaiters.splice(0)) resolve();
    }
  }

  private store(received: T): void {
    const obj = this.opts.transform ? this.opts.transform(received) : received;
    const key = keyOf(obj);
    const old = this.cache.get(key);
    if (old && old.metadata?.resourceVersion === obj.metadata?.resourceVersion) return;
    this.cache.set(key, obj);
    this.emit(old ? 'update' : 'add', obj, old);
  }

  private emit(event: InformerEvent, obj: T, old?: T): void {
    for (const handler of this.handlers[event]) {
      try {
        handler(obj, old);
      } catch (err) {
        this.opts.log.error({ err, event, key: keyOf(obj) }, 'informer handler threw');
      }
    }
  }

  private watch(): Promise<void> {
    const startedAt = Date.now();
    let events = 0;
    return new Promise<void>((resolve, reject) => {
      const watch = new Watch(this.http.kubeConfig);
      this.http.observe('WATCH', this.opts.path, 200);
      let gone = false;
      const query = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
        // The server ends each watch after this; spreading it avoids every informer reconnecting at once.
        timeoutSeconds: 240 + Math.floor(Math.random() * 120),
      };
      watch
        .watch(
          this.opts.path,
          query,
          (type: string, obj: T & { code?: number }) => {
            this.failures = 0;
            events++;
            if (type === 'ERROR') {
              if (obj.code === 410) gone = true;
              return;
            }
            const rv = obj.metadata?.resourceVersion;
            if (rv) this.resourceVersion = rv;
            if (type === 'BOOKMARK') return;
            if (type === 'DELETED') {
              const key = keyOf(obj);
              const old = this.cache.get(key);
              this.cache.delete(key);
              this.emit('delete', obj, old);
            } else {
              this.store(obj);
            }
          },
          (err: unknown) => {
            this.abort = undefined;
            if (gone || (err as { statusCode?: number } | null)?.statusCode === 410) {
              this.resourceVersion = '';
              resolve();
            } else if (err && !this.stopped && (err as Error).name !== 'TimeoutError') {
              reject(err);
            } else {
              resolve();
            }
          },
        )
        .then((controller) => {
          this.abort = controller;
          if (this.stopped) controller.abort();
        }, reject);
    }).then(() => {
      if (this.stopped) return;
      // A watch that ended cleanly (server timeout, 410) is resumed at once; one that closes instantly
      // without delivering anything is treated as a failure, so a misbehaving server is not hammered.
      if (events === 0 && Date.now() - startedAt < 1000) this.scheduleRetry(new Error('watch closed at once'));
      else void this.run();
    });
  }

  private scheduleRetry(err: unknown): void {
    if (this.stopped) return;
    const { initialMs, maxMs } = this.opts.backoff ?? { initialMs: 200, maxMs: 30_000 };
    const delay = Math.min(maxMs, initialMs * 2 ** this.failures);
    this.failures++;
    if (err instanceof KubeApiError && err.status === 410) this.resourceVersion = '';
    this.opts.log.warn({ err: String(err), path: this.opts.path, retryInMs: delay }, 'list/watch failed; retrying');
    this.retryTimer = setTimeout(() => void this.run(), delay);
  }
}
