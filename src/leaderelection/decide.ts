// Pure leader-election decisions with client-go semantics: what a candidate does with the Lease it last
// observed, given its own clock. No I/O here; elector.ts carries the decisions out.
import type { LeaseRecord } from './lease-record.js';

export interface ElectionTimings {
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
}

export interface Observation {
  record: LeaseRecord;
  /** When this candidate saw the record change, on its own clock (client-go's observedTime). */
  observedAt: number;
}

export type Decision = { kind: 'create' } | { kind: 'acquire' } | { kind: 'renew' } | { kind: 'wait'; retryAt: number; holder: string };

/**
 * client-go tryAcquireOrRenew: no lease → create it; our own → renew; empty holder (released) → acquire at
 * once; another holder → acquire only once the record has not changed for its lease duration, timed on our
 * clock — never by comparing the holder's renewTime with our clock.
 */
export function decide(identity: string, observed: Observation | undefined, now: number): Decision {
  if (!observed) return { kind: 'create' };
  const { record, observedAt } = observed;
  if (record.holderIdentity === identity) return { kind: 'renew' };
  if (record.holderIdentity === '') return { kind: 'acquire' };
  const expiresAt = observedAt + record.leaseDurationSeconds * 1000;
  if (now > expiresAt) return { kind: 'acquire' };
  return { kind: 'wait', retryAt: expiresAt, holder: record.holderIdentity };
}

/** The leader gives up when it has not renewed successfully within the renew deadline. */
export function renewDeadlinePassed(lastRenewedAt: number, now: number, t: ElectionTimings): boolean {
  return now - lastRenewedAt >= t.renewDeadlineMs;
}

/** client-go's jittered retry: uniform in [retry, retry × (1 + jitter)], jitter 1.2. */
export function jitteredRetry(t: ElectionTimings, random: number): number {
  return t.retryPeriodMs * (1 + 1.2 * random);
}

/** A record changed when any field differs: the moment to restart the expiry clock (client-go compares bytes). */
export function recordChanged(a: LeaseRecord | undefined, b: LeaseRecord): boolean {
  return (
    !a ||
    a.holderIdentity !== b.holderIdentity ||
    a.renewTime !== b.renewTime ||
    a.acquireTime !== b.acquireTime ||
    a.leaseDurationSeconds !== b.leaseDurationSeconds ||
    a.leaseTransitions !== b.leaseTransitions
  );
}
