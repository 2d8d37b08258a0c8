// Watches the Leases of a namespace and records every version it sees, timed on this machine's clock, so a
// rollout's handovers can be analysed afterwards (handovers.ts). Stop times come from the nodes' own record
// (the moment the kubelet stopped the container), which is what "the old leader was told to stop" means.
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { KubeHttp } from '../../src/kube/http.js';
import { Informer } from '../../src/kube/informer.js';
import { nodeEvents, waitFor } from '../lib/cluster.js';
import type { LeaseObservation } from './handovers.js';

export class LeaseRecorder {
  readonly observations: LeaseObservation[] = [];
  private readonly informer: Informer<V1Lease>;

  constructor(
    http: KubeHttp,
    namespace: string,
    private readonly leases: ReadonlySet<string>,
    log: Logger,
  ) {
    this.informer = new Informer<V1Lease>(http, { path: `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`, log });
    const seen = (l: V1Lease) => {
      const name = l.metadata?.name ?? '';
      if (!this.leases.has(name)) return;
      this.observations.push({
        t: Date.now(),
        lease: name,
        holder: l.spec?.holderIdentity ?? '',
        leaseDurationSeconds: l.spec?.leaseDurationSeconds,
        acquireTime: l.spec?.acquireTime ? String(l.spec.acquireTime) : undefined,
        renewTime: l.spec?.renewTime ? String(l.spec.renewTime) : undefined,
      });
    };
    this.informer.on('add', seen).on('update', seen);
  }

  async start(): Promise<void> {
    this.informer.start();
    await this.informer.waitForSync();
  }

  /**
   * Until this recorder has itself seen every lease held by one of `pods`. Wait on this, not on a GET, before
   * stopping it: a GET can show a new holder before the watch delivers it, and a recorder stopped in between never
   * saw the handover.
   */
  async waitSeenHeldBy(pods: readonly V1Pod[], timeoutMs = 30_000): Promise<void> {
    const names = new Set(pods.map((p) => p.metadata?.name ?? ''));
    await waitFor('the lease recorder to see the new holders', timeoutMs, () => [...this.leases].every((l) => names.has(this.holder(l) ?? '')), 50);
  }

  stop(): void {
    this.informer.stop();
  }

  holder(lease: string): string | undefined {
    return this.informer.list().find((l) => l.metadata?.name === lease)?.spec?.holderIdentity ?? undefined;
  }
}

/** When the node first sent SIGTERM to each pod (by pod name), in ms since epoch. */
export async function sigtermTimes(namespace: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const e of await nodeEvents()) {
    if (e.event === 'signal' && e.signal === 'SIGTERM' && e.namespace === namespace && !out.has(e.pod)) out.set(e.pod, Date.parse(e.t));
  }
  return out;
}
