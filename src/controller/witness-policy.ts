// Keeps src/handover/witness-policy.ts's answer current in every replica: at start, whenever the policy, its
// binding or the witness pods change, and every minute (a role binding can change unseen). The answer goes to the
// handover engine (the witness's condition counts only while trusted), to a gauge, to the log on each change and,
// where witnesses run, to a Warning Event on the policy (Events of cluster-scoped objects go to "default").
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  ATTEST,
  type BindingObject,
  type PolicyObject,
  type Trust,
  WITNESS_POLICY,
  WITNESS_SERVICE_ACCOUNT,
  witnessPolicyTrust,
} from '../handover/witness-policy.js';
import type { EventRecorder } from '../kube/events.js';
import type { KubeHttp } from '../kube/http.js';
import type { Informer, InformerView } from '../kube/informer.js';
import type { Metrics } from '../metrics.js';

/** How often the grant is asked again unprompted: a role binding can change unseen. */
export const WITNESS_POLICY_RECHECK_MS = 60_000;
/** How long the first check waits for the policy caches' first list: an API server without the API never gives one. */
export const WITNESS_POLICY_FIRST_CHECK_WAIT_MS = 10_000;

export interface WitnessPolicyDeps {
  http: KubeHttp;
  log: Logger;
  metrics: Pick<Metrics, 'witnessPolicyInForce'>;
  events: EventRecorder;
  policies: Informer<PolicyObject>;
  bindings: Informer<BindingObject>;
  witnesses: InformerView<V1Pod>;
  witnessNamespace: string;
  isLeader: () => boolean;
}

export class WitnessPolicyWatch {
  private trust: Trust = { trusted: false, why: 'not checked yet' };
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly d: WitnessPolicyDeps) {}

  /** The username of the witness the policy must let attest: the configured namespace's ServiceAccount. */
  get witness(): string {
    return `system:serviceaccount:${this.d.witnessNamespace}:${WITNESS_SERVICE_ACCOUNT}`;
  }

  current(): Trust {
    return this.trust;
  }

  start(): void {
    this.stopped = false;
    const changed = (): void => void this.check();
    for (const i of [this.d.policies, this.d.bindings]) i.on('add', changed).on('update', changed).on('delete', changed);
    this.d.witnesses.on('add', changed).on('delete', changed);
    this.timer = setInterval(changed, WITNESS_POLICY_RECHECK_MS);
    this.timer.unref();
    void this.firstCheck();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
  }

  /**
   * The first answer, once the policy caches have listed (or after WITNESS_POLICY_FIRST_CHECK_WAIT_MS). Asked at
   * once, every replica's start warned that the policies "cannot be read", and with no policy to list (no add event)
   * kept saying so for a whole recheck period. Until then the condition is not trusted, as before: "not checked yet".
   */
  private async firstCheck(): Promise<void> {
    let wait: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([this.d.policies.waitForSync(), this.d.bindings.waitForSync()]),
      new Promise<void>((resolve) => {
        wait = setTimeout(resolve, WITNESS_POLICY_FIRST_CHECK_WAIT_MS);
        wait.unref();
      }),
    ]);
    clearTimeout(wait);
    if (!this.stopped) await this.check();
  }

  /** One check at a time; a change during one makes one more. */
  check(): Promise<void> {
    if (this.checking) {
      this.again = true;
      return this.checking;
    }
    this.checking = this.evaluate().finally(() => {
      this.checking = undefined;
      if (this.again) {
        this.again = false;
        void this.check();
      }
    });
    return this.checking;
  }

  private async evaluate(): Promise<void> {
    const readable = this.d.policies.hasSynced() && this.d.bindings.hasSynced();
    const trust: Trust = readable
      ? witnessPolicyTrust(
          this.d.policies.list().find((p) => p.metadata?.name === WITNESS_POLICY),
          this.d.bindings.list().find((b) => b.metadata?.name === WITNESS_POLICY),
          await this.mayAttest(),
          this.witness,
        )
      : { trusted: false, why: 'the ValidatingAdmissionPolicies cannot be read (an API server without them, or no access)' };
    const before = this.trust;
    this.trust = trust;
    this.d.metrics.witnessPolicyInForce.set(trust.trusted ? 1 : 0);
    if (trust.trusted ? before.trusted : !before.trusted && before.why === trust.why) return;
    if (trust.trusted) {
      this.d.log.info({ policy: WITNESS_POLICY, witness: this.witness }, "the witness's admission policy is in force: its condition on a pod is evidence");
      return;
    }
    const message = `the node witness's condition on a pod is not taken as evidence: ${trust.why}; its reports to the operator still count, and otherwise the kubelet's report decides`;
    this.d.log.warn({ policy: WITNESS_POLICY, witness: this.witness }, message);
    if (this.d.isLeader() && this.d.witnesses.list().length > 0) {
      void this.d.events.emit(
        { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingAdmissionPolicy', name: WITNESS_POLICY },
        'Warning',
        'WitnessPolicyNotInForce',
        message,
      );
    }
  }

  /** Whether the witness's ServiceAccount may attest, by the API server's own authorizer; undefined if it cannot say. */
  private async mayAttest(): Promise<boolean | undefined> {
    const ns = this.d.witnessNamespace;
    try {
      const review = await this.d.http.request<{ status?: { allowed?: boolean } }>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SubjectAccessReview',
          spec: {
            user: this.witness,
            groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
            resourceAttributes: { group: ATTEST.group, resource: ATTEST.resource, verb: ATTEST.verb },
          },
        },
        signal: AbortSignal.timeout(5_000),
      });
      return review?.status?.allowed === true;
    } catch (err) {
      this.d.log.warn({ err: String(err) }, 'cannot ask whether the witness may attest');
      return undefined;
    }
  }
}
