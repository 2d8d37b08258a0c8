// Which leases name which holder, per namespace: when a pod changes, the engine looks up the leases that pod
// may hold instead of scanning every lease. Keyed by the holder's hostname (holderHostname), so a pod's
// sanitised hostname finds both `<pod>` and `<pod>_<suffix>` holders. Names only: the informer keeps the objects.
import type { V1Lease } from '@kubernetes/client-node';
import { holderHostname } from './holder.js';
import { SetMap } from './set-map.js';

// A namespace never contains '/', so `<namespace>/<anything>` is unambiguous.
const key = (namespace: string, s: string): string => `${namespace}/${s}`;

export class LeaseHolderIndex {
  /** `namespace/lease` → holder hostname ('' when nobody holds it) */
  private readonly hostnameOf = new Map<string, string>();
  /** namespace → lease names */
  private readonly byNamespace = new SetMap<string>();
  /** `namespace/hostname` → lease names */
  private readonly byHostname = new SetMap<string>();

  /** A lease was added or updated. */
  set(lease: V1Lease): void {
    const ns = lease.metadata?.namespace ?? '';
    const name = lease.metadata?.name ?? '';
    // Off the wire: a holderIdentity that is not a string names nobody.
    const holder: unknown = lease.spec?.holderIdentity;
    const hostname = typeof holder === 'string' ? holderHostname(holder) : '';
    const previous = this.hostnameOf.get(key(ns, name));
    if (previous === hostname) return;
    if (previous !== undefined) this.byHostname.delete(key(ns, previous), name);
    this.hostnameOf.set(key(ns, name), hostname);
    this.byNamespace.add(ns, name);
    if (hostname !== '') this.byHostname.add(key(ns, hostname), name);
  }

  /** A lease was deleted. */
  delete(lease: V1Lease): void {
    const ns = lease.metadata?.namespace ?? '';
    const name = lease.metadata?.name ?? '';
    const previous = this.hostnameOf.get(key(ns, name));
    if (previous === undefined) return;
    this.hostnameOf.delete(key(ns, name));
    this.byNamespace.delete(ns, name);
    this.byHostname.delete(key(ns, previous), name);
  }

  /** Names of the leases in `namespace` held by `hostname` or `hostname_<suffix>`. */
  heldBy(namespace: string, hostname: string): readonly string[] {
    return this.byHostname.get(key(namespace, hostname));
  }

  /** Names of every lease in `namespace`, held or not, in the order first seen. */
  inNamespace(namespace: string): readonly string[] {
    return this.byNamespace.get(namespace);
  }
}
