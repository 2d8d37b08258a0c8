// One view of the world for one decision: the managed controller Deployments, the pods the engine observed
// (tombstones included), the Leases and the Nodes. Each holder is resolved once, by its key (the Lease's
// namespace and the identity), over one candidate set: the pods of every managed workload whose sidecars keep
// leases in that namespace (--leader-election-namespace, else their own). Lookups are lazy and memoised, so a
// decision costs what it touches, not the size of the cluster.
import type { V1Deployment, V1Lease, V1Node, V1Pod } from '@kubernetes/client-node';
import { type HolderResolution, renewingPod, resolveHolder } from './holder.js';
import { leaseNamespacesOf } from './lease-namespaces.js';
import type { ObservedPod } from './observed-pod.js';
import { provenDead } from './proven-dead.js';

/** What a snapshot reads from: the engine's informer caches and indexes, or plain arrays in tests. */
export interface HandoverSource {
  /** Managed controller Deployments (labelled with the driver label). */
  deployments(): readonly V1Deployment[];
  /** Observed pods of a namespace, tombstones included, in the order first seen. */
  podsIn(namespace: string): readonly ObservedPod[];
  leasesIn(namespace: string): readonly V1Lease[];
  nodes: ReadonlyMap<string, V1Node>;
}

export interface HolderKey {
  namespace: string;
  identity: string;
}

export const workloadRef = (d: V1Deployment): string => `${d.metadata?.namespace ?? ''}/${d.metadata?.name ?? ''}`;

/** A Deployment selects a pod by its selector's matchLabels (matchExpressions are not used by CSI drivers). */
export function selects(dep: V1Deployment, pod: V1Pod): boolean {
  const match = dep.spec?.selector?.matchLabels;
  if (!match || Object.keys(match).length === 0 || dep.spec?.selector?.matchExpressions?.length) return false;
  return dep.metadata?.namespace === pod.metadata?.namespace && Object.entries(match).every(([k, v]) => pod.metadata?.labels?.[k] === v);
}

// Parsed once per Deployment object: the informer replaces the object on every change.
const namespacesCache = new WeakMap<V1Deployment, string[]>();
function namespacesOfTemplate(dep: V1Deployment): string[] {
  let ns = namespacesCache.get(dep);
  if (!ns) {
    ns = leaseNamespacesOf(dep.spec?.template.spec, dep.metadata?.namespace ?? '');
    namespacesCache.set(dep, ns);
  }
  return ns;
}

export class HandoverSnapshot {
  private deps?: readonly V1Deployment[];
  private readonly pods = new Map<V1Deployment, ObservedPod[]>();
  private readonly candidates = new Map<string, ObservedPod[]>();
  private readonly resolved = new Map<string, HolderResolution>();

  constructor(
    private readonly src: HandoverSource,
    readonly now: number,
  ) {}

  get nodes(): ReadonlyMap<string, V1Node> {
    return this.src.nodes;
  }

  deployments(): readonly V1Deployment[] {
    return (this.deps ??= this.src.deployments());
  }

  deployment(namespace: string, name: string): V1Deployment | undefined {
    return this.deployments().find((d) => d.metadata?.namespace === namespace && d.metadata?.name === name);
  }

  workloadOf(pod: V1Pod): V1Deployment | undefined {
    return this.deployments().find((d) => selects(d, pod));
  }

  /** The workload's observed pods, tombstones included. */
  podsOf(dep: V1Deployment): readonly ObservedPod[] {
    let pods = this.pods.get(dep);
    if (!pods) {
      pods = this.src.podsIn(dep.metadata?.namespace ?? '').filter((o) => selects(dep, o.pod));
      this.pods.set(dep, pods);
    }
    return pods;
  }

  /** The namespaces the workload's sidecars keep leases in. */
  leaseNamespacesOf(dep: V1Deployment): readonly string[] {
    return namespacesOfTemplate(dep);
  }

  /** The pods that may hold a lease of this namespace: those of every managed workload electing there. */
  candidatesFor(leaseNamespace: string): readonly ObservedPod[] {
    let pods = this.candidates.get(leaseNamespace);
    if (!pods) {
      pods = this.deployments()
        .filter((d) => namespacesOfTemplate(d).includes(leaseNamespace))
        .flatMap((d) => this.podsOf(d));
      this.candidates.set(leaseNamespace, pods);
    }
    return pods;
  }

  /** Whether any managed workload keeps leases in this namespace. */
  watchesLeasesIn(namespace: string): boolean {
    return this.deployments().some((d) => namespacesOfTemplate(d).includes(namespace));
  }

  resolve(key: HolderKey): HolderResolution {
    const k = `${key.namespace}\n${key.identity}`;
    let r = this.resolved.get(k);
    if (!r) {
      r = resolveHolder(key.identity, this.candidatesFor(key.namespace), this.nodes);
      this.resolved.set(k, r);
    }
    return r;
  }

  /**
   * The pod of no managed workload that holds under this identity, if one does: another controller electing in a
   * drivers' namespace (a driver's own operator on OpenShift, a snapshot-controller). Asked only when the
   * managed workloads' pods do not resolve it, so it never stands in for one of them.
   */
  foreignHolder(key: HolderKey): ObservedPod | undefined {
    const candidates = new Set(this.candidatesFor(key.namespace));
    const others = this.src.podsIn(key.namespace).filter((o) => !candidates.has(o));
    const r = resolveHolder(key.identity, others, this.nodes);
    return r.kind === 'pod' ? r.pod : undefined;
  }

  /** Whether the pod's processes may still run: not gone and not proven dead. */
  mayRun(p: ObservedPod): boolean {
    return !p.gone && !provenDead(p, this.nodes).dead;
  }

  /** The pod whose process renews under this identity now (measurement only: never a reason to release). */
  renewingPod(key: HolderKey): ObservedPod | undefined {
    return renewingPod(key.identity, this.candidatesFor(key.namespace), (p) => this.mayRun(p));
  }

  /** The leases the workload's sidecars may hold: every lease of the namespaces they elect in. */
  leasesOf(dep: V1Deployment): V1Lease[] {
    return namespacesOfTemplate(dep).flatMap((ns) => [...this.src.leasesIn(ns)]);
  }
}

/** A snapshot over plain arrays (tests, tools). */
export function snapshotOf(s: { deployments: V1Deployment[]; pods: ObservedPod[]; leases: V1Lease[]; nodes: V1Node[] }, now: number): HandoverSnapshot {
  const nodes = new Map(s.nodes.map((n) => [n.metadata?.name ?? '', n]));
  return new HandoverSnapshot(
    {
      deployments: () => s.deployments,
      podsIn: (ns) => s.pods.filter((p) => p.pod.metadata?.namespace === ns),
      leasesIn: (ns) => s.leases.filter((l) => l.metadata?.namespace === ns),
      nodes,
    },
    now,
  );
}
