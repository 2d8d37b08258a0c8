// May the operator write there? Asked of the API server (SelfSubjectAccessReview, which every authenticated user
// may create for itself) and remembered — a grant for 10 minutes, a denial for 30 seconds, so a RoleBinding an
// admin adds is seen soon and 1,000 drivers cost a few requests a minute — so a namespace without the RoleBinding
// its writes need is reported on the ClusterCSIDriver before a write fails (a grant revoked meanwhile shows as a 403, after
// which the namespace's answers are forgotten and asked again). Fails open: an unanswered question counts as allowed
// (the write then tells), never as a problem to report.
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { KubeHttp } from './http.js';

export interface WriteNeed {
  verb: string;
  group: string;
  resource: string;
}

/** "update leases", "patch pods", "update deployments" */
export const describeNeed = (n: WriteNeed): string => `${n.verb} ${n.resource}`;

export const LEASE_RELEASE: WriteNeed = { verb: 'update', group: 'coordination.k8s.io', resource: 'leases' };
export const POD_PATCH: WriteNeed = { verb: 'patch', group: '', resource: 'pods' };
export const DEPLOYMENT_UPDATE: WriteNeed = { verb: 'update', group: 'apps', resource: 'deployments' };
export const DAEMONSET_UPDATE: WriteNeed = { verb: 'update', group: 'apps', resource: 'daemonsets' };

const REMEMBER_ALLOWED_MS = 10 * 60_000;
export const DENIAL_REMEMBERED_MS = 30_000;

interface Review {
  status?: { allowed?: boolean };
}

export class WriteAccess {
  private readonly answers = new Map<string, { allowed: boolean; at: number }>();

  constructor(
    private readonly http: KubeHttp,
    private readonly log: Logger,
    private readonly now: Clock,
  ) {}

  /** The needs that are denied in `namespace`, as far as the API server said lately. */
  async denied(namespace: string, needs: readonly WriteNeed[]): Promise<WriteNeed[]> {
    const out: WriteNeed[] = [];
    for (const need of needs) if (!(await this.allowed(namespace, need))) out.push(need);
    return out;
  }

  /**
   * A write in `namespace` was refused (403) although a grant was remembered: the grant was revoked. Forget every
   * answer there, so the next question asks the API server again and the CR reports what is missing.
   */
  forget(namespace: string): void {
    for (const key of [...this.answers.keys()]) if (key.startsWith(`${namespace}|`)) this.answers.delete(key);
  }

  private async allowed(namespace: string, need: WriteNeed): Promise<boolean> {
    const key = `${namespace}|${need.verb}|${need.group}|${need.resource}`;
    const now = this.now();
    const known = this.answers.get(key);
    if (known && now - known.at < (known.allowed ? REMEMBER_ALLOWED_MS : DENIAL_REMEMBERED_MS)) return known.allowed;
    try {
      const review = await this.http.request<Review>('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { namespace, verb: need.verb, group: need.group, resource: need.resource } },
        },
      });
      const allowed = review.status?.allowed === true;
      this.answers.set(key, { allowed, at: now });
      return allowed;
    } catch (err) {
      this.log.debug({ namespace, need: describeNeed(need), err: String(err) }, 'access review failed: assuming allowed');
      return true;
    }
  }
}
