// A list-watch cache that never gives up: it relists on 410 Gone, reconnects from the last resourceVersion
// after any other watch error with capped, jittered exponential backoff (INFORMER_BACKOFF), and reports
// whether it has synced.
// client-node's own informer stops on non-410 errors; the operator cannot afford that.
import type { KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { type KubeHttp } from './http.js';
import { KubeApiError } from './errors.js';

export type InformerEvent = 'add' | 'update' | 'delete';
export type Handler<T> = (obj: T, old?: T) => void;

export interface InformerOptions<T extends KubernetesObject = KubernetesObject> {
  /** Collection path, e.g. `/api/v1/pods` or `/apis/coordination.k8s.io/v1/namespaces/x/leases`. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  log: Logger;
  /** Backoff after a failed list or watch: initial and maximum delay in ms. */
  backoff?: { initialMs: number; maxMs: number };
  /** Applied to every object before it is cached and handed out, e.g. to drop fields nobody reads. */
  transform?: (obj: T) => T;
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

export const keyOf = (o: KubernetesObject): string => (o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata?.name ?? ''}` : (o.metadata?.name ?? ''));

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
    private readonly opts: InformerOptions<T>,
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

  private async watch(): Promise<void> {
    const startedAt = Date.now();
    let events = 0;
    let gone = false;
    const abort = new AbortController();
    this.abort = abort;
    // The server ends each watch after this; spreading it avoids every informer reconnecting at once.
    const timeoutSeconds = 240 + Math.floor(Math.random() * 120);
    try {
      await this.http.watch(
        this.opts.path,
        {
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: true,
          labelSelector: this.opts.labelSelector,
          fieldSelector: this.opts.fieldSelector,
          timeoutSeconds,
        },
        (type, received) => {
          this.failures = 0;
          events++;
          const obj = received as T & { code?: number };
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
            this.emit('delete', this.opts.transform ? this.opts.transform(obj) : obj, old);
          } else {
            this.store(obj);
          }
        },
        // Bookmarks come about once a minute; a stream silent well past its own timeout is dead.
        { signal: abort.signal, idleMs: (timeoutSeconds + 60) * 1000 },
      );
    } catch (err) {
      if (this.stopped) return;
      if (!(err instanceof KubeApiError && err.status === 410)) throw err;
      gone = true;
    } finally {
      if (this.abort === abort) this.abort = undefined;
    }
    if (this.stopped) return;
    if (gone) {
      // The server no longer has our place in its history (compacted, or restarted since): start over.
      this.opts.log.info({ path: this.opts.path, resourceVersion: this.resourceVersion }, 'watch expired (410 Gone): relisting');
      this.resourceVersion = '';
    }
    // A watch that ended cleanly (server timeout, 410) is resumed at once; one that closes instantly
    // without delivering anything is treated as a failure, so a misbehaving server is not hammered.
    if (events === 0 && Date.now() - startedAt < 1000) this.scheduleRetry(new Error('watch closed at once'));
    else void this.run();
  }

  private scheduleRetry(err: unknown): void {
    if (this.stopped) return;
    const delay = retryDelay(this.failures, this.opts.backoff ?? INFORMER_BACKOFF, Math.random());
    this.failures++;
    if (err instanceof KubeApiError && err.status === 410) this.resourceVersion = '';
    this.opts.log.warn({ err: String(err), path: this.opts.path, retryInMs: delay }, 'list/watch failed; retrying');
    this.retryTimer = setTimeout(() => void this.run(), delay);
  }
}

/**
 * An informer's retry backoff. Capped at 5 s, not client-go's 30 s: while the API server is away every informer
 * keeps failing, and with a 30 s cap its watches come back up to 30 s after the API server does (docs/reliability.md;
 * the operator's dozen watches cost the API server little). Jittered, so informers that failed together do not
 * retry in lockstep.
 */
export const INFORMER_BACKOFF = { initialMs: 200, maxMs: 5_000 };

/** The wait before retry number `failures` + 1: doubling from initialMs, capped at maxMs, times 1–1.5 (`random` in [0, 1)). */
export function retryDelay(failures: number, backoff: { initialMs: number; maxMs: number }, random: number): number {
  return Math.round(Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.min(failures, 30)) * (1 + random / 2));
}

/** Several informers (one per watched namespace) seen as one. */
export function unionOf<T>(informers: readonly InformerView<T>[]): InformerView<T> {
  return {
    on(event, handler) {
      for (const i of informers) i.on(event, handler);
      return this;
    },
    get: (key) => informers.map((i) => i.get(key)).find((x) => x !== undefined),
    list: () => informers.flatMap((i) => i.list()),
  };
}
