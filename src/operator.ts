// Wires the operator together: informers (in every replica, so a standby's caches are warm), leader
// election, and — on the leader only — the work queue that runs the ClusterCSIDriver reconcile.
import type { V1DaemonSet, V1Deployment, V1Lease, V1StatefulSet, V1MutatingWebhookConfiguration, V1Node, V1Pod, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { COLLECTION_PATH, validateSpec } from './api/clustercsidriver.js';
import { DRIVER_LABEL } from './api/names.js';
import { systemClock } from './clock.js';
import type { Config } from './config.js';
import { type DriverContext, reconcileDriver, type Workload } from './controller/clustercsidriver.js';
import { HandoverController } from './controller/handover.js';
import { WebhookController } from './controller/webhook.js';
import { nodeForCache, podForCache } from './handover/cached.js';
import { HandoverReports, reportFromStatus } from './handover/report.js';
import { Batcher } from './kube/batcher.js';
import { EventRecorder } from './kube/events.js';
import { isNotFound, type KubeHttp } from './kube/http.js';
import { Informer, type InformerView, keyOf, withoutManagedFields } from './kube/informer.js';
import { WorkQueue } from './kube/workqueue.js';
import { LeaderElector } from './leaderelection/elector.js';
import { type LogLevel, pinoLevelFor } from './loglevel/verbosity.js';
import { WriteAccess } from './kube/access.js';
import { countRequestsOf, type Metrics } from './metrics.js';
import { serviceDnsNames } from './webhook/certs.js';
import { WebhookServer } from './webhook/server.js';

/**
 * Changes a CR only reports (its workloads' rollout progress, handovers) are gathered while they keep coming —
 * until none came for half a second, at most 3 s — and then reconciled as one status write: a pod replacement
 * moves a Deployment's status three or four times and hands over several leases within a second. Spec changes
 * are reconciled at once.
 */
const STATUS_BATCH = { quietMs: 500, maxMs: 3000 };
/** How long a replica that lost its lease waits for its work to stop before it exits instead (as a SIGTERM does). */
const STEP_DOWN_TIMEOUT_MS = 5_000;

type Named = { metadata?: { name?: string; generation?: number; labels?: Record<string, string> } };

export class Operator {
  private readonly drivers: Informer<Named>;
  private readonly deployments: Informer<V1Deployment>[] = [];
  private readonly daemonSets: Informer<V1DaemonSet>[] = [];
  /** Labelled StatefulSets are not managed; watched only to say so on their driver's CR. */
  private readonly statefulSets: Informer<V1StatefulSet>[] = [];
  private readonly queue: WorkQueue;
  private readonly leases: Informer<V1Lease>[] = [];
  private readonly pods: Informer<V1Pod>[] = [];
  private readonly nodes: Informer<V1Node>;
  private readonly webhookInformers: Informer<Named>[] = [];
  readonly handover: HandoverController;
  private readonly webhookServer: WebhookServer | undefined;
  private readonly webhook: WebhookController | undefined;
  private readonly elector: LeaderElector | undefined;
  private readonly operatorLogLevels = new Map<string, LogLevel>();
  private readonly statusChanges = new Batcher<undefined>(STATUS_BATCH, (driver) => this.enqueue(driver));
  private leading = false;
  private shuttingDown = false;

  constructor(
    private readonly cfg: Config,
    private readonly http: KubeHttp,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    private readonly exit: (code: number) => void,
  ) {
    this.drivers = new Informer<Named>(http, { path: COLLECTION_PATH, log });
    const scopes = cfg.namespaces.length ? cfg.namespaces.map((ns) => `/namespaces/${ns}`) : [''];
    for (const scope of scopes) {
      this.deployments.push(new Informer<V1Deployment>(http, { path: `/apis/apps/v1${scope}/deployments`, labelSelector: DRIVER_LABEL, log }));
      this.daemonSets.push(new Informer<V1DaemonSet>(http, { path: `/apis/apps/v1${scope}/daemonsets`, labelSelector: DRIVER_LABEL, log }));
      this.statefulSets.push(new Informer<V1StatefulSet>(http, { path: `/apis/apps/v1${scope}/statefulsets`, labelSelector: DRIVER_LABEL, log }));
      // Leases are small and written back whole on release: cached without their managedFields only. Pods and
      // nodes are many and only read (or patched): cached as the fields decisions read (src/handover/cached.ts).
      this.leases.push(new Informer<V1Lease>(http, { path: `/apis/coordination.k8s.io/v1${scope}/leases`, log, transform: withoutManagedFields }));
      this.pods.push(new Informer<V1Pod>(http, { path: `/api/v1${scope}/pods`, log, transform: podForCache }));
    }
    this.nodes = new Informer<V1Node>(http, { path: '/api/v1/nodes', log, transform: nodeForCache });
    // Level-based: what a CR already reports is where its report starts (after a restart, an upgrade, a new leader).
    const reports = new HandoverReports((driver) => reportFromStatus((this.drivers.get(driver) as { status?: unknown } | undefined)?.status));
    // Whether it may write in a driver's namespace (ClusterRole csi-handover-driver is bound there per namespace).
    const access = new WriteAccess(http, log.child({ component: 'access' }), systemClock);
    this.handover = new HandoverController({
      http, log: log.child({ controller: 'handover' }), metrics,
      events: new EventRecorder(http, log, cfg.identity),
      leases: union(this.leases), pods: union(this.pods), nodes: this.nodes,
      deployments: () => this.deployments.flatMap((i) => i.list()),
      gateTimeoutMs: cfg.gateTimeout,
      earlyStart: cfg.earlyStart,
      reports,
      onReportChanged: (driver) => this.enqueueSoon(driver),
      access,
      now: systemClock,
    });
    if (cfg.webhookPort > 0) {
      const ns = cfg.leaderElectionNamespace;
      this.webhookServer = new WebhookServer({
        log: log.child({ component: 'webhook' }), metrics, gating: cfg.handoverGate,
        decide: (pod, signal) => this.handover.admit(pod, signal),
      });
      const secret = new Informer<V1Secret>(http, { path: `/api/v1/namespaces/${ns}/secrets`, fieldSelector: `metadata.name=${cfg.webhookSecret}`, log });
      // Under OLM the configuration is OLM's, generated from the CSV under a name of its own: not watched, not kept.
      const configuration = cfg.webhookCertSource === 'olm' ? undefined : new Informer<V1MutatingWebhookConfiguration>(http, {
        path: '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', fieldSelector: `metadata.name=${cfg.webhookConfiguration}`, log, transform: withoutManagedFields,
      });
      this.webhookInformers.push(secret as Informer<Named>, ...(configuration ? [configuration as Informer<Named>] : []));
      this.webhook = new WebhookController({
        http, log: log.child({ controller: 'webhook' }), metrics, server: this.webhookServer,
        port: cfg.webhookPort, host: cfg.bindAddress, certSource: cfg.webhookCertSource,
        namespace: ns, secretName: cfg.webhookSecret, configurationName: cfg.webhookConfiguration,
        policy: { dnsNames: serviceDnsNames(cfg.webhookService, ns), validityMs: cfg.webhookCertValidity },
        secret, configuration, deployments: () => this.deployments.flatMap((i) => i.list()), now: systemClock,
      });
      // The webhook asks only about the namespaces of managed controllers: those follow the Deployments.
      for (const inf of this.deployments) inf.on('add', () => this.webhook?.enqueue()).on('delete', () => this.webhook?.enqueue());
    }
    const ctx: DriverContext = {
      http, log, metrics, mode: cfg.mode,
      namespacesDescription: cfg.namespaces.length ? `namespaces ${cfg.namespaces.join(', ')}` : 'any namespace',
      getDriver: (name) => this.drivers.get(name),
      workloadsOf: (driver) => this.workloadsOf(driver),
      unmanagedOf: (driver) => this.statefulSets.flatMap((i) => i.list()).filter((o) => o.metadata?.labels?.[DRIVER_LABEL] === driver).map((o) => `StatefulSet ${keyOf(o)}`).sort(),
      handoverReport: (driver) => reports.get(driver),
      access,
      now: systemClock,
    };
    this.queue = new WorkQueue({
      name: 'clustercsidriver',
      reconcile: async (key) => {
        const end = metrics.reconcileDuration.startTimer({ controller: 'clustercsidriver' });
        log.debug({ driver: key }, 'reconcile start');
        try {
          return await reconcileDriver(key, ctx);
        } finally {
          end();
          log.debug({ driver: key }, 'reconcile end');
        }
      },
      onError: (key, err, retryInMs) => {
        metrics.reconcileErrors.inc({ controller: 'clustercsidriver' });
        log.warn({ driver: key, err: String(err), retryInMs }, 'reconcile failed; retrying with backoff');
      },
      onDone: (_key, _ms, outcome) => metrics.reconciles.inc({ controller: 'clustercsidriver', outcome }),
    });
    // Every replica follows spec.operatorLogLevel, so a standby that takes over logs at the level asked for.
    const onDriver = (o: Named, old?: Named) => {
      const name = o.metadata?.name ?? '';
      const v = validateSpec(((o as { spec?: Record<string, unknown> }).spec) ?? {});
      this.setOperatorLogLevel(name, v.ok ? v.spec.operatorLogLevel : undefined);
      // A new spec is acted on at once; a status-only change (mostly our own write coming back) only needs a look,
      // with the next batch of reported changes.
      if (old && old.metadata?.generation === o.metadata?.generation) this.enqueueSoon(name);
      else this.enqueue(name);
    };
    this.drivers.on('add', onDriver).on('update', onDriver).on('delete', (o) => {
      this.setOperatorLogLevel(o.metadata?.name ?? '', undefined);
      this.enqueue(o.metadata?.name);
    });
    const enqueueOwner = (o: Named) => this.enqueueSoon(o.metadata?.labels?.[DRIVER_LABEL]);
    for (const inf of [...this.deployments, ...this.daemonSets, ...this.statefulSets] as Informer<Named>[]) {
      inf.on('add', enqueueOwner).on('update', enqueueOwner).on('delete', enqueueOwner);
    }
    if (cfg.leaderElection) {
      this.elector = new LeaderElector({
        http: http.observedBy(countRequestsOf(metrics, 'leader-election')), log, namespace: cfg.leaderElectionNamespace, name: cfg.leaseName, identity: cfg.identity,
        timings: { leaseDurationMs: cfg.leaseDuration, renewDeadlineMs: cfg.renewDeadline, retryPeriodMs: cfg.retryPeriod },
        onStartedLeading: () => this.startLeading(),
        onStoppedLeading: () => void this.stepDown(),
      });
    }
  }

  /**
   * Leadership lost (the renew deadline passed, or another replica holds the lease): another replica may be leading
   * already, so every piece of work stops at once; once it has, this replica is a candidate again, in-process. Exiting
   * instead (as client-go components do) would put it in the kubelet's crash backoff after a few API server blips
   * and leave the driver with no operator for minutes. Work that does not stop in time ends with the process.
   */
  private async stepDown(): Promise<void> {
    this.leading = false;
    this.metrics.leader.set(0);
    this.metrics.leadershipLost.inc();
    const tooLong = setTimeout(() => {
      this.log.error({ timeoutMs: STEP_DOWN_TIMEOUT_MS }, 'work did not stop in time after the lost leadership: exiting');
      this.exit(1);
    }, STEP_DOWN_TIMEOUT_MS);
    try {
      await Promise.all([this.queue.shutDown(), this.handover.stop(), this.webhook?.stop()]);
    } finally {
      clearTimeout(tooLong);
    }
    if (this.shuttingDown) return;
    this.log.info('all work stopped after the lost leadership');
    this.elector?.campaign();
  }

  /**
   * Gates fail open for good: when the operator is being uninstalled or scaled to zero, no replica will come to
   * lift the gates it placed, so the last leader lifts them on its way out. A rolling update keeps them: the next
   * leader takes them over within seconds.
   */
  private async failOpenIfLeaving(): Promise<void> {
    const why = await operatorLeaving(this.http, this.cfg.leaderElectionNamespace, this.cfg.operatorDeployment);
    if (!why) return;
    const lifted = await this.handover.liftAllGates('operator leaving');
    this.log.info({ why, lifted }, 'operator going away: lifted every handover gate it placed');
  }

  private enqueue(name: string | undefined): void {
    if (!name || !this.leading) return;
    this.queue.add(name);
    this.metrics.queueDepth.set({ queue: 'clustercsidriver' }, this.queue.len());
  }

  /** A change the driver's status reports: reconciled with the others that come with it (STATUS_BATCH). */
  private enqueueSoon(name: string | undefined): void {
    if (!name || !this.leading) return;
    this.statusChanges.add(name, undefined);
  }

  private workloadsOf(driver: string): Workload[] {
    const mine = (o: Named) => o.metadata?.labels?.[DRIVER_LABEL] === driver;
    return [
      ...this.deployments.flatMap((i) => i.list().filter(mine).map((obj): Workload => ({ kind: 'Deployment', obj }))),
      ...this.daemonSets.flatMap((i) => i.list().filter(mine).map((obj): Workload => ({ kind: 'DaemonSet', obj }))),
    ].sort((a, b) => keyOf(a.obj).localeCompare(keyOf(b.obj)));
  }

  /** The most verbose operatorLogLevel any ClusterCSIDriver asks for; Normal when none does. */
  private setOperatorLogLevel(driver: string, level: LogLevel | undefined): void {
    if (level === undefined) this.operatorLogLevels.delete(driver);
    else this.operatorLogLevels.set(driver, level);
    const rank = { info: 0, debug: 1, trace: 2 } as const;
    let want: 'info' | 'debug' | 'trace' = this.cfg.logLevel === 'debug' || this.cfg.logLevel === 'trace' ? this.cfg.logLevel : 'info';
    for (const l of this.operatorLogLevels.values()) if (rank[pinoLevelFor(l)] > rank[want]) want = pinoLevelFor(l);
    if (this.log.level !== want) {
      this.log.info({ from: this.log.level, to: want }, 'operator log level changed by spec.operatorLogLevel');
      this.log.level = want;
    }
  }

  /** The caches the operator cannot work without: readiness and leading wait for them. */
  private allInformers(): Informer<Named>[] {
    return [this.drivers, ...this.deployments, ...this.daemonSets, ...this.leases, ...this.pods, this.nodes, ...this.webhookInformers] as Informer<Named>[];
  }

  /**
   * Caches that only add to a report (labelled StatefulSets): started and stopped with the others but never waited
   * for, so a role without them (an upgrade whose roles lag) costs that note, not the operator.
   */
  private optionalInformers(): Informer<Named>[] {
    return this.statefulSets as Informer<Named>[];
  }

  informersSynced(): boolean {
    return this.allInformers().every((i) => i.hasSynced());
  }

  /** Ready for traffic: caches synced and, where the webhook is served, a serving certificate loaded. */
  readiness(): { ready: boolean; reason: string } {
    if (!this.informersSynced()) return { ready: false, reason: 'caches not synced' };
    if (this.webhookServer && !this.webhookServer.ready) return { ready: false, reason: 'webhook has no serving certificate yet' };
    return { ready: true, reason: 'ok' };
  }

  async start(): Promise<void> {
    for (const i of [...this.allInformers(), ...this.optionalInformers()]) i.start();
    await Promise.all(this.allInformers().map((i) => i.waitForSync()));
    this.log.info({ mode: this.cfg.mode }, 'caches synced');
    this.webhook?.loadCurrent();
    if (this.elector) this.elector.start();
    else this.startLeading();
  }

  private startLeading(): void {
    this.leading = true;
    this.metrics.leader.set(1);
    this.queue.start();
    this.handover.start();
    this.webhook?.start();
    for (const d of this.drivers.list()) this.enqueue(d.metadata?.name);
  }

  /** What a shutdown under way is waiting for (told when it takes too long). */
  shutdownStage = 'not shutting down';

  /** Stop all work, then release the lease so a standby takes over at once (never the other way round). */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    const wasLeading = this.leading;
    this.leading = false;
    this.shutdownStage = 'stopping the work queues (in-flight reconciles)';
    await Promise.all([this.queue.shutDown(), this.handover.stop(), this.webhook?.stop()]);
    this.shutdownStage = 'closing the webhook server (open admission connections)';
    await this.webhookServer?.close();
    this.shutdownStage = 'lifting gates if the operator is going away';
    if (wasLeading || !this.elector) await this.failOpenIfLeaving();
    this.metrics.leader.set(0);
    if (this.elector) {
      this.shutdownStage = 'releasing the operator lease';
      try {
        await this.elector.release();
      } catch (err) {
        this.log.warn({ err: String(err) }, 'releasing the operator lease failed; the standby will wait for it to expire');
      }
    }
    for (const i of [...this.allInformers(), ...this.optionalInformers()]) i.stop();
  }
}

/** Whether this replica's Deployment is going away (deleted, being deleted, scaled to zero); unknown counts as staying. */
async function operatorLeaving(http: KubeHttp, namespace: string, name: string): Promise<string | undefined> {
  try {
    const d = await http.request<V1Deployment>('GET', `/apis/apps/v1/namespaces/${namespace}/deployments/${name}`, { signal: AbortSignal.timeout(3000) });
    if (d.metadata?.deletionTimestamp) return 'the operator Deployment is being deleted';
    if (d.spec?.replicas === 0) return 'the operator Deployment is scaled to zero';
    return undefined;
  } catch (err) {
    return isNotFound(err) ? 'the operator Deployment is gone' : undefined;
  }
}

/** Several informers (one per watched namespace) seen as one, for the handover engine. */
function union<T extends Named>(informers: Informer<T>[]): InformerView<T> {
  return {
    on(event, handler) {
      for (const i of informers) i.on(event, handler);
      return this;
    },
    get: (key) => informers.map((i) => i.get(key)).find((x) => x !== undefined),
    list: () => informers.flatMap((i) => i.list()),
  };
}
