// A status write in parts, so that one field an API server refuses never stops the others: the ClusterCSIDriver's
// schema is another team's (OpenShift's CRD, an admission policy of the cluster's admin), and a server-side apply
// of a field it does not declare is refused whole, not pruned. Each part is remembered as refused by its content:
// the same content is not sent again (for a while), new content is tried once more.
import { createHash } from 'node:crypto';
import type { Condition } from '../api/clustercsidriver.js';
import { KubeApiError } from '../kube/errors.js';
import { canonicalJson } from '../kube/same-content.js';

export interface StatusPart {
  /** what it is, for logs and Events: "conditions", "condition CSIHandoverLeasesHandedOver", "generations" */
  name: string;
  /** Without the required part nothing else is written (our Available/Progressing/Degraded conditions). */
  required: boolean;
  conditions?: Condition[];
  fields?: Record<string, unknown>;
}

/**
 * A part's identity: its name and content. A refusal is remembered by this. A condition's lastTransitionTime is not
 * content: one the server refused is never on the object, so each reconcile dates it anew.
 */
export function partKey(p: StatusPart): string {
  const conditions = (p.conditions ?? []).map(({ lastTransitionTime: _, ...rest }) => rest);
  const digest = createHash('sha256')
    .update(canonicalJson({ c: conditions, f: p.fields ?? {} }))
    .digest('base64url')
    .slice(0, 16);
  return `${p.name}#${digest}`;
}

/** The status object of the given parts: their conditions in order, their fields merged. */
export function statusOf(parts: readonly StatusPart[]): Record<string, unknown> {
  const status: Record<string, unknown> = {};
  const conditions = parts.flatMap((p) => p.conditions ?? []);
  if (conditions.length) status.conditions = conditions;
  for (const p of parts) Object.assign(status, p.fields ?? {});
  return status;
}

/**
 * What to send, leaving out what was refused with the same content: undefined when a required part is refused
 * (nothing can go without it until it changes).
 */
export function partsToSend(parts: readonly StatusPart[], refused: ReadonlySet<string>): StatusPart[] | undefined {
  if (parts.some((p) => p.required && refused.has(partKey(p)))) return undefined;
  return parts.filter((p) => !refused.has(partKey(p)));
}

/**
 * Why a status write failed, and whether sending the same body again can succeed. `schema`: a field the CRD does
 * not declare (the API server answers a server-side apply of one with a 500); `invalid`, `forbidden` (RBAC or an
 * admission policy), `not-found` (the object or its CRD is gone), `bad-request`: the same body gets the same answer.
 * `transient`: a timeout, a conflict, throttling, any other 5xx — retried with backoff.
 */
export type WriteFailure = 'schema' | 'invalid' | 'forbidden' | 'not-found' | 'bad-request' | 'transient';

export function classifyWriteFailure(err: unknown): WriteFailure {
  if (!(err instanceof KubeApiError)) return 'transient';
  if (/not declared in schema/i.test(err.message)) return 'schema';
  switch (err.status) {
    case 400:
      return 'bad-request';
    case 403:
      return 'forbidden';
    case 404:
      return 'not-found';
    case 422:
      return 'invalid';
    default:
      return 'transient';
  }
}
