// The operator: its caches (in every replica, so a standby is warm), its parts — the ClusterCSIDriver, handover
// and webhook controllers — and leader election, which starts the parts that need leadership on the leader only
// and stops them when it is lost. Each part is wired here from the caches and configuration.
import type { V1Deployment } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock } from '../clock.js';
import type { Config } from '../config.js';
import { ClusterCSIDriverController } from '../controller/clustercsidriver/controller.js';
import { HandoverController } from '../controller/handover/controller.js';
import type { Part } from '../controller/part.js';
import { WebhookController } from '../controller/webhook.js';
import { WitnessReports } from '../controller/witness-reports.js';
import { WitnessPolicyWatch } from '../controller/witness-policy.js';
import { WITNESS_AUDIENCE } from '../handover/witness-report.js';
import { TokenReviewer } from '../kube/token-review.js';
import { HandoverReports, reportFromStatus } from '../handover/report.js';
import { HandoverReportObject, reportOwnerUid } from '../api/handover-report.js';
import { StatusWriter } from '../controller/clustercsidriver/status-writer.js';
import { WriteAccess } from '../kube/access.js';
import { EventRecorder } from '../kube/events.js';
import { type KubeHttp } from '../kube/http.js';
import { isNotFound } from '../kube/errors.js';
import { LeaderElector } from '../leaderelection/elector.js';
import { OperatorLogLevel } from '../loglevel/operator-log-level.js';
import { countRequestsOf, type Metrics } from '../metrics.js';
import { witnessedNodes } from '../handover/witness-evidence.js';
import { Caches } from './caches.js';
import { serviceDnsNames } from '../webhook/certs.js';
import { WebhookServer } from '../webhook/server.js';

/** How long a replica that lost its lease waits for its work to stop before it exits instead (as a SIGTERM does). */
const STEP_DOWN_TIMEOUT_MS = 5_000;

export class Operator {
  private readonly caches: Caches;
  readonly handover: HandoverController;
  private readonly witnessPolicy: WitnessPolicyWatch;
  private readonly webhookServer: WebhookServer | undefined;
  private readonly webhook: WebhookController | undefined;
  private readonly parts: Part[];
  private readonly elector: LeaderElector | undefined;
  private leading = false;
  private shuttingDown = false;
  /** What a shutdown under way is waiting for (told when it takes too long). */
  shutdownStage = 'not shutting down';

  constructor(
    private readonly cfg: Config,
    private readonly http: KubeHttp,
    private readonly log: Logger,
    private readonly metrics: Metrics,
    private readonly exit: (code: number) => void,
  ) {
    const caches = (this.caches = new Caches(http, cfg, log));
    const common = { http, metrics, now: systemClock };
    // Level-based: a driver's stored CSIHandoverReport is where its report starts (after a restart, an upgrade, a new
    // leader), if it belongs to the driver's CR of now (by UID: a CR made again under the same name starts clean).
    const storedReport = (driver: string) => {
      const parsed = HandoverReportObject.safeParse(caches.reports.get(driver));
      return parsed.success ? { uid: parsed.data.metadata.uid, ownerUid: reportOwnerUid(parsed.data), status: parsed.data.status } : undefined;
    };
    const crUid = (driver: string) => caches.drivers.get(driver)?.metadata?.uid;
    const reports = new HandoverReports((driver, uid) => {
      const stored = storedReport(driver);
      return stored && uid !== undefined && stored.ownerUid === uid ? reportFromStatus(stored.status) : undefined;
    }, crUid);
    const events = new EventRecorder(http, log, cfg.identity);
    // Whether it may write in a driver's namespace (ClusterRole csi-handover-driver is bound there per namespace).
    const access = new WriteAccess(http, log.child({ component: 'access' }), systemClock);
    const { drivers: driverCache, deployments, daemonSets, statefulSets, leases, pods, nodes, witnesses } = caches;
    const drivers = new ClusterCSIDriverController({
      ...common,
      drivers: driverCache,
      deployments,
      daemonSets,
      statefulSets,
      log,
      mode: cfg.mode,
      access,
      handoverReport: (driver) => reports.get(driver),
      storedReport,
      statusWriter: new StatusWriter({ ...common, log, events }),
      namespacesDescription: cfg.namespaces.length ? `namespaces ${cfg.namespaces.join(', ')}` : 'any namespace',
      operatorLogLevel: new OperatorLogLevel(log, cfg.logLevel),
    });
    this.witnessPolicy = new WitnessPolicyWatch({
      http,
      log: log.child({ component: 'witness-policy' }),
      metrics,
      events,
      policies: caches.witnessPolicies,
      bindings: caches.witnessPolicyBindings,
      witnesses,
      witnessNamespace: cfg.witnessNamespace,
      isLeader: () => this.leading,
    });
    const witnessPolicy = this.witnessPolicy;
    this.handover = new HandoverController({
      ...common,
      leases,
      pods,
      nodes,
      log: log.child({ controller: 'handover' }),
      events,
      deployments: () => deployments.list(),
      gateTimeoutMs: cfg.gateTimeout,
      earlyStart: cfg.earlyStart,
      witnessedNodes: () => witnessedNodes(witnesses.list(), nodes.list()),
      witnessConditionTrust: () => witnessPolicy.current(),
      witnessClockSkewMs: cfg.witnessClockSkew,
      reports,
      onReportChanged: (driver) => drivers.statusChanged(driver),
      onAdmissionScopeChanged: () => this.webhook?.scopeChanged(),
      access,
    });
    this.parts = [drivers, this.handover];
    // A report changed or removed by someone else is written again as the operator knows it.
    const reportChanged = (o: { metadata?: { name?: string } }) => drivers.statusChanged(o.metadata?.name);
    caches.reports.on('update', reportChanged).on('delete', reportChanged);
    if (caches.webhookSecret) {
      const ns = cfg.leaderElectionNamespace;
      const handover = this.handover;
      const witnessReports = new WitnessReports({
        reviewer: new TokenReviewer(http, WITNESS_AUDIENCE, systemClock),
        witnessNamespace: cfg.witnessNamespace,
        witnesses,
        nodes,
        handover,
        now: systemClock,
        log: log.child({ component: 'witness-reports' }),
        metrics,
      });
      this.webhookServer = new WebhookServer({
        log: log.child({ component: 'webhook' }),
        metrics,
        gating: cfg.handoverGate,
        decide: (pod, signal) => handover.admission.admit(pod, signal),
        witnessReport: (token, body) => witnessReports.receive(token, body),
      });
      this.webhook = new WebhookController({
        ...common,
        log: log.child({ controller: 'webhook' }),
        server: this.webhookServer,
        port: cfg.webhookPort,
        host: cfg.bindAddress,
        certSource: cfg.webhookCertSource,
        namespace: ns,
        secretName: cfg.webhookSecret,
        configurationName: cfg.webhookConfiguration,
        policy: { dnsNames: serviceDnsNames(cfg.webhookService, ns), validityMs: cfg.webhookCertValidity },
        secret: caches.webhookSecret,
        configuration: caches.webhookConfiguration,
        deployments: caches.deployments,
        admissionNamespaces: () => handover.admissionNamespaces(),
      });
      this.parts.push(this.webhook);
      // Where a witness comes or goes, the webhook's scope follows.
      const scope = () => this.webhook?.scopeChanged();
      witnesses.on('add', scope).on('update', scope).on('delete', scope);
    }
    if (cfg.leaderElection) {
      this.elector = new LeaderElector({
        http: http.observedBy(countRequestsOf(metrics, 'leader-election')),
        log,
        namespace: cfg.leaderElectionNamespace,
        name: cfg.leaseName,
        identity: cfg.identity,
        timings: { leaseDurationMs: cfg.leaseDuration, renewDeadlineMs: cfg.renewDeadline, retryPeriodMs: cfg.retryPeriod },
        onStartedLeading: () => this.startLeading(),
        onStoppedLeading: () => void this.stepDown(),
      });
    }
  }

  informersSynced(): boolean {
    return this.caches.synced();
  }

  /** Ready for traffic: caches synced and, where the webhook is served, a serving certificate loaded. */
  readiness(): { ready: boolean; reason: string } {
    if (!this.caches.synced()) return { ready: false, reason: 'caches not synced' };
    if (this.webhookServer && !this.webhookServer.ready) return { ready: false, reason: 'webhook has no serving certificate yet' };
    return { ready: true, reason: 'ok' };
  }

  async start(): Promise<void> {
    this.caches.start();
    this.witnessPolicy.start();
    await this.caches.waitForSync();
    this.log.info({ mode: this.cfg.mode }, 'caches synced');
    this.webhook?.loadCurrent();
    for (const p of this.parts) if (!p.needsLeadership) p.start();
    if (this.elector) this.elector.start();
    else this.startLeading();
  }

  private startLeading(): void {
    // Not reached once leave() is called; the elector's write may still be under way when the shutdown begins.
    if (this.shuttingDown) return;
    this.leading = true;
    this.metrics.leader.set(1);
    for (const p of this.parts) if (p.needsLeadership) p.start();
  }

  private async stopLeading(): Promise<void> {
    this.leading = false;
    await Promise.all(this.parts.filter((p) => p.needsLeadership).map((p) => p.stop()));
  }

  /**
   * Leadership lost (the renew deadline passed, or another replica holds the lease): another replica may be leading
   * already, so every piece of work stops at once; once it has, this replica is a candidate again, in-process. Exiting
   * instead (as client-go components do) would put it in the kubelet's crash backoff after a few API server blips
   * and leave the driver with no operator for minutes. Work that does not stop in time ends with the process.
   */
  private async stepDown(): Promise<void> {
    this.metrics.leader.set(0);
    this.metrics.leadershipLost.inc();
    const tooLong = setTimeout(() => {
      this.log.error({ timeoutMs: STEP_DOWN_TIMEOUT_MS }, 'work did not stop in time after the lost leadership: exiting');
      this.exit(1);
    }, STEP_DOWN_TIMEOUT_MS);
    try {
      await this.stopLeading();
    } finally {
      clearTimeout(tooLong);
    }
    if (this.shuttingDown) return;
    this.log.info('all work stopped after the lost leadership');
    this.elector?.campaign();
  }

  /** Stop all work, then release the lease so a standby takes over at once (never the other way round). */
  async shutdown(): Promise<void> {
    this.shuttingDown = true;
    this.elector?.leave();
    const wasLeading = this.leading;
    this.shutdownStage = 'stopping the work queues (in-flight reconciles)';
    await this.stopLeading();
    await Promise.all(this.parts.filter((p) => !p.needsLeadership).map((p) => p.stop()));
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
    this.witnessPolicy.stop();
    this.caches.stop();
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
