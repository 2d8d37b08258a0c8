// An informer cache fed by hand, for tests of what reads one: no API server, the same add/update/delete order.
import type { KubernetesObject } from '@kubernetes/client-node';
import { type Handler, type InformerEvent, type InformerView, keyOf } from '../../src/kube/informer.js';

/** An informer cache fed by hand: updates the cache, then tells the handlers, as the real one does. */
export class FakeInformer<T extends KubernetesObject> implements InformerView<T> {
  private readonly cache = new Map<string, T>();
  private readonly handlers: Record<InformerEvent, Handler<T>[]> = { add: [], update: [], delete: [] };
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
  put(obj: T): void {
    const old = this.cache.get(keyOf(obj));
    this.cache.set(keyOf(obj), obj);
    for (const h of this.handlers[old ? 'update' : 'add']) h(obj, old);
  }
  remove(obj: T): void {
    this.cache.delete(keyOf(obj));
    for (const h of this.handlers.delete) h(obj);
  }
}
