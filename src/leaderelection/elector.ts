// The operator's own leader election: client-go semantics (decide.ts) with optimistic concurrency on the
// Lease, release on shutdown once all work has stopped, and — what client-go does not do — a standby that
// watches the Lease and tries the moment it is released, instead of on its next poll.
import type { Logger } from 'pino';
import { type Clock, systemClock } from '../clock.js';
import { type KubeHttp } from '../kube/http.js';
import { isConflict, isNotFound } from '../kube/errors.js';
import { Informer } from '../kube/informer.js';
import { decide, type ElectionTimings, jitteredRetry, type Observation, recordChanged, renewDeadlinePassed } from './decide.js';
import { acquiredRecord, LeaseObject, type LeaseRecord, releasedRecord } from './lease-record.js';

export interface ElectorOptions {
  http: KubeHttp;
  namespace: string;
  name: string;
  identity: string;
  timings: ElectionTimings;
  log: Logger;
  onStartedLeading: () => void;
  /**
   * Called once when leadership is lost (not on a deliberate release). The elector then stands aside: the caller
   * stops all work and calls campaign() to become a candidate again.
   */
  onStoppedLeading: () => void;
  now?: Clock;
}

export class LeaderElector {
  private observed: Observation | undefined;
  private resourceVersion = '';
  private leader = false;
  private lastRenewedAt = 0;
  private mustRead = true;
  private timer: NodeJS.Timeout | undefined;
  private attempt: Promise<void> | undefined;
  private againAfterAttempt = false;
  private stopped = false;
  /** Shutting down: a leader keeps renewing until its work has stopped, a candidate never takes the lease. */
  private leaving = false;
  /** After a lost leadership, until campaign(): no attempt, so no new term begins while the last one's work stops. */
  private standingAside = false;
  private readonly informer: Informer<{ metadata?: { name?: string; resourceVersion?: string }; spec?: unknown }>;
  private readonly now: Clock;
  private readonly path: string;

  constructor(private readonly o: ElectorOptions) {
    this.now = o.now ?? systemClock;
    this.path = `/apis/coordination.k8s.io/v1/namespaces/${o.namespace}/leases`;
    this.informer = new Informer(o.http, { path: this.path, fieldSelector: `metadata.name=${o.name}`, log: o.log });
    const onLease = (obj: unknown) => this.observe(obj, 'watch');
    this.informer.on('add', onLease).on('update', onLease);
  }

  start(): void {
    this.informer.start();
    this.schedule(0);
  }

  /**
   * A candidate again after a lost leadership, once the caller has stopped every piece of its work. The lease is read
   * before anything is written, as by any candidate: if no one else took it meanwhile (an API server that did not
   * answer for longer than the renew deadline), it is ours again at once; otherwise we wait for it as a standby.
   */
  campaign(): void {
    if (this.stopped || !this.standingAside) return;
    this.standingAside = false;
    this.mustRead = true;
    this.o.log.info({ lease: this.o.name }, 'campaigning again');
    this.schedule(0);
  }

  /**
   * The replica is going away: from now on the lease is only renewed, never acquired. A standby that took a lease
   * released during its own shutdown would start work it is stopping, or die holding it, so that the others wait
   * for it to expire.
   */
  leave(): void {
    this.leaving = true;
  }

  private observe(obj: unknown, source: 'watch' | 'get'): void {
    const parsed = LeaseObject.safeParse(obj);
    if (!parsed.success) {
      this.o.log.warn({ lease: this.o.name, issues: parsed.error.issues }, 'malformed operator lease; ignoring this version');
      return;
    }
    const record = parsed.data.spec;
    if (recordChanged(this.observed?.record, record)) this.observed = { record, observedAt: this.now() };
    // While leading, the watch's copy of our own lease can lag our last write: renew on what the write returned.
    if (!(source === 'watch' && this.leader && record.holderIdentity === this.o.identity)) this.resourceVersion = parsed.data.metadata.resourceVersion;
    if (this.leader && record.holderIdentity !== this.o.identity) {
      this.lose(`lease now held by "${record.holderIdentity}"`);
      return;
    }
    // The standby's edge over client-go: a released lease is tried at once, not on the next poll.
    if (!this.leader && source === 'watch' && record.holderIdentity === '') this.tryAtOnce();
  }

  /** Tries now; with an attempt under way (it may have read the lease before this release), again right after it. */
  private tryAtOnce(): void {
    if (this.attempt) this.againAfterAttempt = true;
    else this.schedule(0);
  }

  private schedule(delayMs: number): void {
    if (this.stopped || this.standingAside) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tryAcquireOrRenew(), Math.max(0, delayMs));
  }

  private tryAcquireOrRenew(): Promise<void> {
    this.attempt ??= this.attemptOnce().finally(() => {
      this.attempt = undefined;
      // Otherwise the release seen meanwhile would wait for the jittered retry the attempt scheduled.
      if (this.againAfterAttempt && !this.leader) this.schedule(0);
      this.againAfterAttempt = false;
    });
    return this.attempt;
  }

  private async attemptOnce(): Promise<void> {
    if (this.stopped || this.standingAside || (this.leaving && !this.leader)) return;
    const { http, identity, timings } = this.o;
    try {
      // A leader renews on what its own last write returned (the watch would tell it of anyone else's):
      // a renewal is one PUT, and a 409 makes the next attempt read first. A candidate reads, as client-go.
      if (!this.leader || this.mustRead) {
        try {
          this.observe(await http.get(`${this.path}/${this.o.name}`), 'get');
        } catch (err) {
          if (!isNotFound(err)) throw err;
          this.observed = undefined;
        }
      }
      this.mustRead = true;
      const now = this.now();
      const d = decide(identity, this.observed, now);
      if (d.kind === 'wait') {
        if (this.leader) this.lose(`lease held by ${d.holder}`);
        this.schedule(Math.min(d.retryAt - now + 1, jitteredRetry(timings, Math.random())));
        return;
      }
      const record = acquiredRecord(this.observed?.record, identity, Math.round(timings.leaseDurationMs / 1000), now);
      if (d.kind === 'create') {
        const created = await http.request('POST', this.path, {
          body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.o.name, namespace: this.o.namespace }, spec: record },
        });
        this.observe(created, 'get');
      } else {
        const updated = await http.request('PUT', `${this.path}/${this.o.name}`, {
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: { name: this.o.name, namespace: this.o.namespace, resourceVersion: this.resourceVersion },
            spec: record,
          },
        });
        this.observe(updated, 'get');
      }
      // Stopped or stood aside while the write was under way: whatever it won is not acted on (it expires, or the
      // next campaign renews it before anything is done).
      if (this.stopped || this.standingAside) return;
      this.lastRenewedAt = now;
      this.mustRead = false;
      if (!this.leader) {
        this.leader = true;
        this.o.log.info({ lease: this.o.name }, 'became leader');
        this.o.onStartedLeading();
      }
      this.schedule(timings.retryPeriodMs);
    } catch (err) {
      this.o.log[isConflict(err) ? 'debug' : 'warn']({ lease: this.o.name, err: String(err) }, 'lease acquire/renew failed');
      if (this.leader && renewDeadlinePassed(this.lastRenewedAt, this.now(), timings)) {
        this.lose('renew deadline passed');
        return;
      }
      this.schedule(this.leader ? timings.retryPeriodMs / 4 : jitteredRetry(timings, Math.random()));
    }
  }

  private lose(why: string): void {
    if (!this.leader) return;
    this.leader = false;
    this.standingAside = true;
    clearTimeout(this.timer);
    this.o.log.error({ lease: this.o.name, why }, 'lost leadership');
    this.o.onStoppedLeading();
  }

  /** Stops campaigning and renewing. Does not release: call release() once all work has stopped. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.informer.stop();
  }

  /**
   * Writes the client-go release record if we still hold the lease, so a standby takes over at once. Only
   * safe after every reconcile has finished (the caller's job): otherwise two leaders act at once.
   */
  async release(): Promise<boolean> {
    this.stop();
    await this.attempt;
    this.leader = false;
    // The lease, not our flag, says whether it is ours: a write that won it while we stopped was never acted on,
    // and is released like any other.
    const current = LeaseObject.parse(await this.o.http.get(`${this.path}/${this.o.name}`));
    if (current.spec.holderIdentity !== this.o.identity) return false;
    const record: LeaseRecord = releasedRecord(current.spec, this.now());
    await this.o.http.request('PUT', `${this.path}/${this.o.name}`, {
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: this.o.name, namespace: this.o.namespace, resourceVersion: current.metadata.resourceVersion },
        spec: record,
      },
    });
    this.o.log.info({ lease: this.o.name }, 'released leadership');
    return true;
  }
}
