// Early starts (opt-in): when a workload's past handovers show its old leader is released reliably long before a
// new pod could try the lease, the new pod is let go before the release. The model (src/handover/overlap.ts)
// learns from every handover every replica observes; this keeps what it learns from and answers the plans.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { HANDOVER_STATE } from '../../api/names.js';
import type { Clock } from '../../clock.js';
import { hasHandoverGate } from '../../handover/gate.js';
import type { HandoverRecord } from '../../handover/measure.js';
import type { ObservedPod } from '../../handover/observed-pod.js';
import { containersStartedBy, earlyLiftAt, type LetGo, lessonOf, OverlapModel, witnessLiftAt } from '../../handover/overlap.js';
import { type EarlyLift, OVERLAP_STATE_PREFIX } from '../../handover/pending.js';
import { type HandoverSnapshot, workloadRef } from '../../handover/snapshot.js';
import type { Metrics } from '../../metrics.js';
import { uidOf } from './world.js';

export class EarlyStarts {
  private readonly overlap = new OverlapModel();
  /** pod uid → when it was let go (its gate lifted, or first seen ungated while a handover was pending) and whether before the release */
  private readonly letGo = new Map<string, LetGo>();
  /** workload → when a pod of it let go early last lost the race */
  private readonly lostAt = new Map<string, number>();

  constructor(
    private readonly d: {
      /** Let new pods go before the release where the model predicts it safe (otherwise it only learns). */
      enabled: boolean;
      /** Nodes where a node witness runs Ready. */
      witnessedNodes: () => ReadonlySet<string>;
      log: Logger;
      metrics: Metrics;
      /** When a pod's deletion was first seen (src/controller/handover/reporting.ts). */
      stopSeenAt: (uid: string) => number | undefined;
      now: Clock;
    },
  ) {}

  /**
   * Let go: our gate gone since the last sight, or a first sight of a pod admitted ungated mid-handover — marked
   * so by the webhook, or created while its workload's handover was pending (`pendingNow`, asked only then: the
   * webhook answers from its cache without the mark where a witness runs on the holder's node).
   */
  podSeen(pod: V1Pod, previous: ObservedPod | undefined, pendingNow: () => boolean): void {
    const uid = uidOf(pod);
    if (hasHandoverGate(pod) || this.letGo.has(uid)) return;
    const marked = pod.metadata?.annotations?.[HANDOVER_STATE]?.startsWith(OVERLAP_STATE_PREFIX) === true;
    if (previous) {
      // The gate came off: early if lifted before the release (the lift marks it so).
      if (hasHandoverGate(previous.pod)) this.letGo.set(uid, { at: this.d.now(), early: marked });
    } else if (marked || pendingNow()) this.letGo.set(uid, { at: this.d.now(), early: true });
  }

  prune(cutoff: number): void {
    for (const [uid, l] of this.letGo) if (l.at < cutoff) this.letGo.delete(uid);
  }

  /** The earliest moment a new pod may start while `holder` is being stopped (undefined: wait for the release): by the witness, or the model. */
  earlyLift(s: HandoverSnapshot): EarlyLift | undefined {
    const witnessed = this.d.witnessedNodes();
    if (!this.d.enabled && witnessed.size === 0) return undefined;
    return (holder) => {
      const dep = s.workloadOf(holder.pod);
      if (!dep) return undefined;
      const workload = workloadRef(dep);
      const node = holder.pod.spec?.nodeName;
      const byWitness = witnessLiftAt(node, witnessed, this.lostAt.get(workload), s.now);
      if (byWitness !== undefined) return byWitness;
      const p = this.d.enabled ? this.overlap.predict(workload, node) : undefined;
      if (!p) return undefined;
      // Not seen stopping yet (the admission of its replacement can come first): it is being stopped now.
      return earlyLiftAt(p, this.d.stopSeenAt(holder.pod.metadata?.uid ?? '') ?? s.now);
    };
  }

  /** What a handover teaches: how long the old leader took to be released, the new pod to try. */
  learn(h: HandoverRecord, old: ObservedPod | undefined, next: ObservedPod | undefined, s: HandoverSnapshot): void {
    const dep = old && s.workloadOf(old.pod);
    if (!dep || h.oldPod === undefined) return;
    const workload = workloadRef(dep);
    const startedBy = next && (containersStartedBy(next.pod) ?? h.acquiredAt);
    const lesson = lessonOf(h, h.newPod === undefined ? undefined : this.letGo.get(h.newPod), startedBy);
    if (lesson.death !== undefined) this.overlap.death(workload, old.pod.spec?.nodeName ?? '', h.oldPod, lesson.death);
    if (lesson.start !== undefined && h.newPod !== undefined) this.overlap.start(workload, h.newPod, lesson.start);
    if (lesson.lost) {
      this.overlap.lost(workload);
      this.lostAt.set(workload, this.d.now());
      this.d.metrics.overlapLost.inc();
      this.d.log.warn(
        { workload, lease: `${h.namespace}/${h.lease}`, pod: h.newHolder, afterMs: h.acquiredAt - (this.letGo.get(h.newPod ?? '')?.at ?? NaN) },
        'a pod started before the release lost the race for its lease: new pods of this workload wait for the release again until relearned',
      );
    }
  }
}
