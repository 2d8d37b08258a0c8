// Release a Lease early, on behalf of a holder that is proven dead, with the record client-go itself writes on
// release. When in doubt, do nothing: the lease then expires exactly as it would without us.
// The caller writes the record with the resourceVersion it decided on, so a holder that renewed meanwhile wins.
import type { V1Lease, V1LeaseSpec, V1Node } from '@kubernetes/client-node';
import { type LeaseRecord, microTime, releasedRecord } from '../leaderelection/lease-record.js';
import { resolveHolder } from './holder.js';
import { parseKubeTime } from './kube-time.js';
import { type ObservedPod, podRef, witnessOf } from './observed-pod.js';
import { containersFinishedAt, provenDead } from './proven-dead.js';

export type ReleaseDecision =
  | { action: 'release'; holder: string; pod: string; evidence: string; message: string }
  | {
      action: 'none';
      reason: 'not-held' | 'released-by-holder' | 'expired' | 'holder-alive' | 'unresolved-holder' | 'malformed-lease';
      message: string;
      holder?: string;
    };

// finishedAt has whole seconds; a renewal within the second the last container finished is still its own.
const FINISHED_AT_PRECISION_MS = 1000;

function malformed(message: string): ReleaseDecision {
  return { action: 'none', reason: 'malformed-lease', message };
}

export function decideRelease(lease: V1Lease, pods: readonly ObservedPod[], nodes: ReadonlyMap<string, V1Node>, now: number): ReleaseDecision {
  const name = `${lease.metadata?.namespace ?? ''}/${lease.metadata?.name ?? ''}`;
  const spec = lease.spec;
  if (!spec) return malformed(`lease ${name} has no spec`);
  // Read as unknown: the object comes off the wire, whatever the generated types promise.
  const holder: unknown = spec.holderIdentity;
  const durationSeconds: unknown = spec.leaseDurationSeconds;
  if (typeof holder !== 'string') return malformed(`lease ${name} has no holderIdentity string`);
  if (typeof durationSeconds !== 'number' || !Number.isInteger(durationSeconds) || durationSeconds <= 0) {
    return malformed(`lease ${name} has leaseDurationSeconds ${String(durationSeconds)}, not a positive integer`);
  }
  const renewedAt = parseKubeTime(spec.renewTime);
  if (renewedAt === undefined) return malformed(`lease ${name} has renewTime ${JSON.stringify(spec.renewTime)}, not an RFC 3339 time`);

  if (holder === '') {
    // leaseDurationSeconds 1 with no holder is client-go's release record.
    return durationSeconds === 1
      ? { action: 'none', reason: 'released-by-holder', message: `lease ${name} was released by its holder` }
      : { action: 'none', reason: 'not-held', message: `lease ${name} has no holder` };
  }
  const expiresAt = renewedAt + durationSeconds * 1000;
  if (expiresAt < now) {
    return {
      action: 'none',
      reason: 'expired',
      holder,
      message: `lease ${name} held by '${holder}' expired at ${microTime(expiresAt)} by its own record: candidates take it without us`,
    };
  }

  const resolution = resolveHolder(holder, pods, nodes);
  if (resolution.kind === 'none') return { action: 'none', reason: 'not-held', message: `lease ${name} has no holder` };
  if (resolution.kind === 'unresolved') {
    return { action: 'none', reason: 'unresolved-holder', holder, message: `lease ${name}: ${resolution.reason}: ${resolution.message}` };
  }
  const pod = resolution.pod.pod;
  const verdict = provenDead(resolution.pod, nodes);
  if (!verdict.dead) {
    return { action: 'none', reason: 'holder-alive', holder, message: `lease ${name} held by '${holder}': ${verdict.reason}: ${verdict.message}` };
  }
  // A renewal after the holder's last container finished came from someone else with the same identity (a
  // re-created pod of the same name, or another hostNetwork pod on the node) that our pod cache has not seen.
  const finishedAt = containersFinishedAt(pod);
  if (finishedAt !== undefined && renewedAt >= finishedAt + FINISHED_AT_PRECISION_MS) {
    return {
      action: 'none',
      reason: 'holder-alive',
      holder,
      message: `lease ${name} held by '${holder}' was renewed at ${microTime(renewedAt)}, after ${podRef(pod)} had finished at ${microTime(finishedAt)}: another process uses that identity`,
    };
  }
  // The witness's instant is exact and on the same node clock: nothing it saw could renew at or after it.
  const witnessed = witnessOf(resolution.pod);
  if (witnessed !== undefined && renewedAt >= witnessed.exitedBy) {
    return {
      action: 'none',
      reason: 'holder-alive',
      holder,
      message: `lease ${name} held by '${holder}' was renewed at ${microTime(renewedAt)}, not before the witness saw every container of ${podRef(pod)} exit (${microTime(witnessed.exitedBy)}): a process the witness did not see renewed it`,
    };
  }
  return { action: 'release', holder, pod: podRef(pod), evidence: verdict.evidence, message: `lease ${name} held by '${holder}': ${verdict.message}` };
}

/** client-go's release record for this lease at `now`: no holder, 1s, acquire and renew times now, transitions unchanged. */
export function releaseRecord(spec: V1LeaseSpec, now: number): LeaseRecord {
  return releasedRecord(
    { holderIdentity: spec.holderIdentity ?? '', leaseDurationSeconds: spec.leaseDurationSeconds ?? 0, leaseTransitions: spec.leaseTransitions ?? 0 },
    now,
  );
}
