// Whether a new pod waits behind the handover gate: the webhook's question, answered by planAdmission over the
// holders as the API has them now, failing open where the gate could not be lifted again.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import { isTerminating, type ObservedPod, observePod, observePodGone, podRef } from '../../handover/observed-pod.js';
import { heldLeases } from '../../handover/pending.js';
import { type AdmissionPlan, admissionSettled, planAdmission } from '../../handover/plan.js';
import { POD_PATCH, type WriteAccess } from '../../kube/access.js';
import { type KubeHttp } from '../../kube/http.js';
import { isNotFound } from '../../kube/errors.js';
import type { EarlyStarts } from './early-starts.js';
import type { ObservedWorld } from './world.js';

export class HandoverAdmission {
  constructor(private readonly d: { http: KubeHttp; log: Logger; world: ObservedWorld; early: EarlyStarts; access?: WriteAccess; now: Clock }) {}

  /**
   * Decided over the holders as the API has them now: the replacement pod is created milliseconds after the old
   * leader's deletion, which the informer may not have delivered yet. Each holder of the workload's leases is
   * read again (usually one pod: the leader holds every lease) unless the cache already shows it being stopped:
   * what matters is whether a handover is pending, and a read could only add that it died meanwhile, which the
   * release right after tells anyway. A failed read keeps what was observed. No read where its answer could not
   * change the plan (a live witness on every holder's node: ungated either way) — under a rollout's load it took
   * 7–108 ms, all of it added to the new pod's creation.
   */
  async admit(pod: V1Pod, signal: AbortSignal): Promise<AdmissionPlan> {
    const cached = this.d.world.snapshot();
    const dep = cached.workloadOf(pod);
    const early = this.d.early.earlyLift(cached);
    if (!dep || admissionSettled(cached, pod, early)) return planAdmission(cached, pod, early);
    const fresh = new Map<string, ObservedPod>();
    await Promise.all(heldLeases(cached, dep).map(({ holder }) => this.reread(holder, fresh, signal)));
    const s = this.d.world.snapshot(fresh);
    const plan = planAdmission(s, pod, this.d.early.earlyLift(s));
    // A gate this operator could not lift (no RoleBinding to csi-handover-driver there) would strand the pod: fail open.
    const ns = pod.metadata?.namespace ?? '';
    if (plan.gate && this.d.access && (await this.d.access.denied(ns, [POD_PATCH])).length) {
      return {
        gate: false,
        reason: 'no-write-access',
        message: `csi-handover may not patch pods in namespace ${ns}: not gated, as it could not lift the gate`,
      };
    }
    return plan;
  }

  private async reread(o: ObservedPod, fresh: Map<string, ObservedPod>, signal: AbortSignal): Promise<void> {
    const uid = o.pod.metadata?.uid ?? '';
    if (o.gone || isTerminating(o) || fresh.has(uid)) return;
    const m = o.pod.metadata;
    fresh.set(uid, o); // one read per holder, however many leases it holds
    try {
      const now = await this.d.http.request<V1Pod>('GET', `/api/v1/namespaces/${m?.namespace}/pods/${m?.name}`, { signal });
      fresh.set(uid, now.metadata?.uid === uid ? observePod(o, now) : observePodGone(o, o.pod, this.d.now()));
    } catch (err) {
      if (isNotFound(err)) fresh.set(uid, observePodGone(o, o.pod, this.d.now()));
      else this.d.log.debug({ pod: podRef(o.pod), err: String(err) }, 'admission: re-reading a holder failed; deciding on what was observed');
    }
  }
}
