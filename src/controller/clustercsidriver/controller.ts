// The ClusterCSIDriver controller: one key per driver name, queued when its CR's spec changes (at once) or when
// something its status reports changes — its workloads' rollout, its handovers, our own status write coming
// back — gathered while they keep coming, until none came for half a second (at most 3 s), into one reconcile:
// a pod replacement moves a Deployment's status three or four times and hands over several leases in a second.
import type { V1DaemonSet, V1Deployment, V1StatefulSet } from '@kubernetes/client-node';
import { validateSpec } from '../../api/clustercsidriver.js';
import { DRIVER_LABEL } from '../../api/names.js';
import { Batcher } from '../../kube/batcher.js';
import { type InformerView, keyOf } from '../../kube/informer.js';
import type { WorkQueue } from '../../kube/workqueue.js';
import type { OperatorLogLevel } from '../../loglevel/operator-log-level.js';
import type { Part } from '../part.js';
import { controllerQueue } from '../queue.js';
import type { Workload } from './plan.js';
import { type DriverContext, reconcileDriver } from './reconcile.js';

type Labelled = { metadata?: { name?: string; generation?: number; labels?: Record<string, string> }; spec?: unknown };

export interface DriverControllerDeps extends Omit<DriverContext, 'getDriver' | 'workloadsOf' | 'unmanagedOf'> {
  drivers: InformerView<Labelled>;
  deployments: InformerView<V1Deployment>;
  daemonSets: InformerView<V1DaemonSet>;
  statefulSets: InformerView<V1StatefulSet>;
  operatorLogLevel: OperatorLogLevel;
}

const STATUS_BATCH = { quietMs: 500, maxMs: 3000 };

export class ClusterCSIDriverController implements Part {
  readonly name = 'clustercsidriver';
  readonly needsLeadership = true;
  private readonly queue: WorkQueue<string>;
  private readonly statusChanges: Batcher<undefined>;
  private active = false;

  constructor(private readonly d: DriverControllerDeps) {
    const ctx: DriverContext = {
      ...d,
      getDriver: (name) => d.drivers.get(name),
      workloadsOf: (driver) => this.workloadsOf(driver),
      unmanagedOf: (driver) =>
        d.statefulSets
          .list()
          .filter((o) => o.metadata?.labels?.[DRIVER_LABEL] === driver)
          .map((o) => `StatefulSet ${keyOf(o)}`)
          .sort(),
    };
    this.queue = controllerQueue({
      controller: 'clustercsidriver',
      metrics: d.metrics,
      log: d.log,
      id: (name: string) => name,
      logFields: (driver) => ({ driver }),
      reconcile: (name) => reconcileDriver(name, ctx),
    });
    this.statusChanges = new Batcher<undefined>(STATUS_BATCH, (driver) => this.enqueue(driver), d.now);
    const onDriver = (o: Labelled, old?: Labelled) => {
      const name = o.metadata?.name ?? '';
      const v = validateSpec((o.spec as Record<string, unknown> | undefined) ?? {});
      d.operatorLogLevel.set(name, v.ok ? v.spec.operatorLogLevel : undefined);
      // A status-only change (mostly our own write coming back) only needs a look, with the next batch.
      if (old && old.metadata?.generation === o.metadata?.generation) this.statusChanged(name);
      else this.enqueue(name);
    };
    d.drivers
      .on('add', onDriver)
      .on('update', onDriver)
      .on('delete', (o) => {
        d.operatorLogLevel.set(o.metadata?.name ?? '', undefined);
        d.statusWriter.forget(o.metadata?.name ?? '');
        this.enqueue(o.metadata?.name);
      });
    // A workload relabelled to another driver leaves its old driver too: both report their workloads anew.
    const owner = (o: Labelled, old?: Labelled) => {
      this.statusChanged(o.metadata?.labels?.[DRIVER_LABEL]);
      const before = old?.metadata?.labels?.[DRIVER_LABEL];
      if (before !== o.metadata?.labels?.[DRIVER_LABEL]) this.statusChanged(before);
    };
    for (const inf of [d.deployments, d.daemonSets, d.statefulSets] as InformerView<Labelled>[]) inf.on('add', owner).on('update', owner).on('delete', owner);
  }

  start(): void {
    this.active = true;
    this.queue.start();
    for (const dr of this.d.drivers.list()) this.enqueue(dr.metadata?.name);
  }

  async stop(): Promise<void> {
    this.active = false;
    await this.queue.shutDown();
  }

  /** Something the driver's status reports changed (its handovers, say): reconciled with what comes with it. */
  statusChanged(driver: string | undefined): void {
    if (driver && this.active) this.statusChanges.add(driver, undefined);
  }

  private enqueue(driver: string | undefined): void {
    if (driver && this.active) this.queue.add(driver);
  }

  private workloadsOf(driver: string): Workload[] {
    const mine = (o: Labelled) => o.metadata?.labels?.[DRIVER_LABEL] === driver;
    return [
      ...this.d.deployments
        .list()
        .filter(mine)
        .map((obj): Workload => ({ kind: 'Deployment', obj })),
      ...this.d.daemonSets
        .list()
        .filter(mine)
        .map((obj): Workload => ({ kind: 'DaemonSet', obj })),
    ].sort((a, b) => keyOf(a.obj).localeCompare(keyOf(b.obj)));
  }
}
