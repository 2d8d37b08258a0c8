// The reliability invariants, as pure checks over what an independent observer saw (hack/lib/observer.ts): the
// Leases and Pods as the API server served them, and each real node's own record of which container processes
// existed (containerd's events, hack/node-record.ts). Not the operator's code and not its view: a release is
// judged against the runtime's truth, not against what the kubelet reported. Unit-tested in
// test/unit/invariants.test.ts.
import type { NodeEvent } from './node-events.js';

/** One version of a Lease as the observer saw it. */
export interface LeaseSample {
  /** ms since epoch, when the observer saw it */
  t: number;
  namespace: string;
  lease: string;
  holder: string;
  acquireTime?: string;
  renewTime?: string;
  leaseDurationSeconds?: number;
  /** carries the operator's release mark (csi-handover.io/released-at) */
  releasedByOperator: boolean;
}

/** One version of a Pod as the observer saw it (deleted: the watch's delete event). */
export interface PodSample {
  t: number;
  namespace: string;
  name: string;
  uid: string;
  /** creationTimestamp, ms */
  created: number;
  gated: boolean;
  /** the csi-handover.io/handover-state annotation */
  state?: string;
  deleted: boolean;
}

export type Invariant =
  | 'release-while-running' // a release record for a holder whose processes still ran
  | 'two-leaders' // a new holder acquired while the old one still ran with a lease it could believe valid
  | 'gate-held-too-long' // a gated pod let go later than the gate timeout
  | 'left-behind' // a gate, or a handover state still waiting, on a live pod at the end
  | 'rollout-incomplete'
  | 'status-diverged'; // the CR's report or conditions disagree with what is true, after settling

export interface Violation {
  invariant: Invariant;
  /** ms since epoch: when it happened (not when it was found) */
  at: number;
  subject: string;
  message: string;
}

const ms = (t: string | undefined): number | undefined => {
  if (!t) return undefined;
  const v = Date.parse(t);
  return Number.isNaN(v) ? undefined : v;
};

/**
 * The containers of a pod (namespace/name) whose process ran at `t`, by the nodes' record: a container runs from
 * its task's start to its exit; a container restarted in place has one such interval per start.
 */
export function containersRunningAt(events: readonly NodeEvent[], namespace: string, pod: string, t: number): string[] {
  const depth = new Map<string, number>();
  for (const e of events) {
    if (e.namespace !== namespace || e.pod !== pod || e.container === undefined) continue;
    const at = Date.parse(e.t);
    if (at > t) continue;
    if (e.event === 'container-started') depth.set(e.container, (depth.get(e.container) ?? 0) + 1);
    else if (e.event === 'container-exited') depth.set(e.container, (depth.get(e.container) ?? 0) - 1);
  }
  return [...depth]
    .filter(([, n]) => n > 0)
    .map(([c]) => c)
    .sort();
}

/** Samples grouped by `keyOf`, each group in observation order. */
function inTimeOrderBy<S extends { t: number }>(samples: readonly S[], keyOf: (s: S) => string): Map<string, S[]> {
  const out = new Map<string, S[]>();
  for (const s of [...samples].sort((a, b) => a.t - b.t)) {
    const key = keyOf(s);
    const list = out.get(key);
    if (list) list.push(s);
    else out.set(key, [s]);
  }
  return out;
}

/** Lease samples grouped per lease (namespace/name), each in observation order. */
const perLease = (samples: readonly LeaseSample[]) => inTimeOrderBy(samples, (s) => `${s.namespace}/${s.lease}`);

/**
 * No release for a running holder, and never two leaders: for every release record the observer saw, the
 * previous holder's containers must all have exited by the record's time (its renewTime, stamped by whoever
 * released: same machine, same clock as the runtime's events); a holder releasing itself (no operator mark) is
 * the holder's own business. For every change to a new holder, the old holder must either be gone by the new
 * one's acquireTime or have let its lease run out (its last renewTime + duration before that acquireTime: a
 * client-go leader that cannot renew stops acting before then). Only samples seen before `until` are judged.
 */
export function checkLeases(samples: readonly LeaseSample[], events: readonly NodeEvent[], until = Infinity): Violation[] {
  const out: Violation[] = [];
  for (const [key, list] of perLease(samples)) {
    let current = ''; // the holder now ('' once released)
    let last: LeaseSample | undefined; // the last non-empty holder's last record of its own
    let selfReleased = false; // that holder released the lease itself since
    for (const s of list) {
      if (s.t > until) break;
      if (s.holder !== '' && s.holder === current) {
        last = s; // a renewal
        continue;
      }
      if (s.holder === '') {
        if (current !== '' && s.releasedByOperator) {
          const at = ms(s.renewTime) ?? s.t;
          const running = containersRunningAt(events, s.namespace, current, at);
          if (running.length > 0) {
            out.push({
              invariant: 'release-while-running',
              at,
              subject: key,
              message: `released by the operator for ${current} while its containers ${running.join(', ')} still ran`,
            });
          }
        }
        if (current !== '' && !s.releasedByOperator) selfReleased = true;
        current = '';
        continue;
      }
      // A new holder: the last one must be gone, or have released itself, or have let its lease run out.
      if (last && last.holder !== s.holder && !selfReleased) {
        const at = ms(s.acquireTime) ?? s.t;
        const validUntil = (ms(last.renewTime) ?? -Infinity) + (last.leaseDurationSeconds ?? 0) * 1000;
        const running = containersRunningAt(events, s.namespace, last.holder, at);
        if (running.length > 0 && validUntil > at) {
          out.push({
            invariant: 'two-leaders',
            at,
            subject: key,
            message: `${s.holder} acquired while ${last.holder} still ran (${running.join(', ')}) with a lease valid until ${new Date(validUntil).toISOString()}`,
          });
        }
      }
      current = s.holder;
      last = s;
      selfReleased = false;
    }
  }
  return out;
}

export interface GateCheck {
  gateTimeoutMs: number;
  /** allowance on top of the timeout: the operator's resync and the API server's second-granular creationTimestamp */
  slackMs: number;
  /** judge pods still gated at this time as overdue (and, with `final`, anything still waiting as left behind) */
  now: number;
  final: boolean;
  /**
   * When the API server did not answer (the observer's own probes): nobody can lift a gate then, so a pod's
   * allowance grows by the outage it lived through plus `retryAfterOutageMs` (the operator's backoff cap, the
   * most it may wait before trying again once the server is back).
   */
  outages?: readonly { from: number; to: number }[];
  retryAfterOutageMs?: number;
}

/** How much of [from, to] fell inside the outages, in ms. */
export function overlapMs(outages: readonly { from: number; to: number }[], from: number, to: number): number {
  return outages.reduce((sum, o) => sum + Math.max(0, Math.min(o.to, to) - Math.max(o.from, from)), 0);
}

/**
 * Every gated pod let go (gate removed, or the pod deleted) within the gate timeout of its creation; at the end,
 * no live pod keeps the gate or a handover state that still waits (a lifted pod's state starts with "started").
 */
export function checkGates(samples: readonly PodSample[], c: GateCheck): Violation[] {
  const byUid = inTimeOrderBy(samples, (s) => s.uid);
  const out: Violation[] = [];
  for (const list of byUid.values()) {
    const first = list[0];
    if (!first) continue;
    const subject = `${first.namespace}/${first.name}`;
    const gatedAt = list.find((s) => s.gated && !s.deleted);
    if (gatedAt) {
      const letGo = list.find((s) => s.t >= gatedAt.t && (!s.gated || s.deleted));
      const heldUntil = letGo?.t ?? c.now;
      const down = overlapMs(c.outages ?? [], first.created, heldUntil);
      const allowance = c.gateTimeoutMs + c.slackMs + (down > 0 ? down + (c.retryAfterOutageMs ?? 0) : 0);
      if (heldUntil - first.created > allowance) {
        out.push({
          invariant: 'gate-held-too-long',
          at: heldUntil,
          subject,
          message: `gated ${((heldUntil - first.created) / 1000).toFixed(1)} s after creation${letGo ? '' : ' and still gated'} (gate timeout ${c.gateTimeoutMs / 1000} s${down > 0 ? `, API server down ${(down / 1000).toFixed(1)} s of it` : ''})`,
        });
      }
    }
    const last = list[list.length - 1];
    if (c.final && last && !last.deleted) {
      if (last.gated) out.push({ invariant: 'left-behind', at: c.now, subject, message: 'still carries the handover gate' });
      else if (last.state !== undefined && !last.state.startsWith('started'))
        out.push({ invariant: 'left-behind', at: c.now, subject, message: `handover state still waiting: ${last.state}` });
    }
  }
  return out;
}
