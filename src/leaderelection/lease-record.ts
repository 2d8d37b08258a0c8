// The coordination.k8s.io/v1 Lease record as leader election reads and writes it, validated at the
// boundary, and the record writes that client-go makes (acquire, renew, release).
import { z } from 'zod';

export const LeaseRecord = z.object({
  holderIdentity: z
    .string()
    .nullish()
    .transform((v) => v ?? ''),
  leaseDurationSeconds: z
    .number()
    .int()
    .nonnegative()
    .nullish()
    .transform((v) => v ?? 0),
  acquireTime: z.string().nullish(),
  renewTime: z.string().nullish(),
  leaseTransitions: z
    .number()
    .int()
    .nonnegative()
    .nullish()
    .transform((v) => v ?? 0),
});
export type LeaseRecord = z.infer<typeof LeaseRecord>;

export const LeaseObject = z.object({
  metadata: z.object({ name: z.string(), namespace: z.string().optional(), resourceVersion: z.string() }),
  spec: LeaseRecord.nullish().transform((v) => v ?? LeaseRecord.parse({})),
});
export type LeaseObject = z.infer<typeof LeaseObject>;

/** Kubernetes MicroTime: RFC 3339 with microseconds. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** The record client-go writes when a candidate takes the lease. */
export function acquiredRecord(previous: LeaseRecord | undefined, identity: string, durationSeconds: number, now: number): LeaseRecord {
  const sameHolder = previous?.holderIdentity === identity;
  return {
    holderIdentity: identity,
    leaseDurationSeconds: durationSeconds,
    acquireTime: sameHolder && previous.acquireTime ? previous.acquireTime : microTime(now),
    renewTime: microTime(now),
    // As client-go: a new lease starts at 0; taking it from anyone else (even an empty holder) counts one.
    leaseTransitions: previous ? previous.leaseTransitions + (sameHolder ? 0 : 1) : 0,
  };
}

/** client-go's release(): empty holder, 1s duration, acquire and renew times now, transitions unchanged. */
export function releasedRecord(previous: LeaseRecord, now: number): LeaseRecord {
  return {
    holderIdentity: '',
    leaseDurationSeconds: 1,
    acquireTime: microTime(now),
    renewTime: microTime(now),
    leaseTransitions: previous.leaseTransitions,
  };
}
