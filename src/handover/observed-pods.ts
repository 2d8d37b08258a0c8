// Every pod the engine has observed (tombstones included), by uid, with the two lookups it needs on each
// event: the pods of a namespace (a lease's candidates, a workload's pods) and the pods on a node (whose
// readiness changed). Tombstones expire oldest first, so expiring them never scans the live pods.
import type { V1Pod } from '@kubernetes/client-node';
import type { ObservedPod } from './observed-pod.js';
import { SetMap } from './set-map.js';

const namespaceOf = (p: V1Pod): string => p.metadata?.namespace ?? '';
const nodeOf = (p: V1Pod): string | undefined => p.spec?.nodeName || undefined;

export class ObservedPods {
  private readonly byUid = new Map<string, ObservedPod>();
  private readonly byNamespace = new SetMap<string>();
  private readonly byNode = new SetMap<string>();
  /** uid → goneAt of each tombstone, in the order recorded: the clock's order. */
  private readonly tombstones = new Map<string, number>();

  get size(): number {
    return this.byUid.size;
  }

  get(uid: string): ObservedPod | undefined {
    return this.byUid.get(uid);
  }

  /** Records the latest observation of a pod (a tombstone when `o.gone`). */
  set(uid: string, o: ObservedPod): void {
    const previous = this.byUid.get(uid)?.pod;
    const node = nodeOf(o.pod);
    // A pod is bound once; namespaces never change. Unchanged keys keep their place (the order first seen).
    if (previous && namespaceOf(previous) !== namespaceOf(o.pod)) this.byNamespace.delete(namespaceOf(previous), uid);
    const previousNode = previous && nodeOf(previous);
    if (previousNode !== undefined && previousNode !== node) this.byNode.delete(previousNode, uid);
    this.byUid.set(uid, o);
    this.byNamespace.add(namespaceOf(o.pod), uid);
    if (node !== undefined) this.byNode.add(node, uid);
    // Deleted and re-inserted, so the map stays in goneAt order.
    this.tombstones.delete(uid);
    if (o.gone) this.tombstones.set(uid, o.goneAt ?? 0);
  }

  /** Observed pods of the namespace, in the order first seen. */
  inNamespace(namespace: string): ObservedPod[] {
    return this.lookup(this.byNamespace.get(namespace));
  }

  /** Observed pods bound to the node. */
  onNode(node: string | undefined): ObservedPod[] {
    return node ? this.lookup(this.byNode.get(node)) : [];
  }

  /** Forgets the tombstones recorded before `cutoff` (ms on the clock that stamped goneAt). */
  dropGoneBefore(cutoff: number): void {
    for (const [uid, goneAt] of this.tombstones) {
      if (goneAt >= cutoff) break;
      this.tombstones.delete(uid);
      const o = this.byUid.get(uid);
      if (!o) continue;
      this.byUid.delete(uid);
      this.unindex(uid, o);
    }
  }

  private unindex(uid: string, o: ObservedPod): void {
    this.byNamespace.delete(namespaceOf(o.pod), uid);
    const node = nodeOf(o.pod);
    if (node !== undefined) this.byNode.delete(node, uid);
  }

  private lookup(uids: readonly string[]): ObservedPod[] {
    const out: ObservedPod[] = [];
    for (const uid of uids) {
      const o = this.byUid.get(uid);
      if (o) out.push(o);
    }
    return out;
  }
}
