// The witness's evidence sent straight to the operator (POST /witness/v1/exited on every replica), beside the pod
// condition it also writes: the condition takes an API write and a watch event to arrive (~0.1–0.35 s on a loaded
// node), the report one request. Who may send it is decided as for the condition: the sender's ServiceAccount
// token (its own audience, reviewed by the API server) must be bound to a Ready witness pod, and that pod's node is
// the only node it speaks for. Anything else is refused and changes nothing: the condition, or the kubelet's
// report, still comes.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import type { TokenReviewStatus } from '../kube/token-review.js';
import { parseKubeTime } from './kube-time.js';
import { type WitnessEvidence, witnessedNodes } from './witness-evidence.js';

export const WITNESS_REPORT_PATH = '/witness/v1/exited';
/** A token for this audience is good for nothing but reporting to the operator: the API server does not accept it. */
export const WITNESS_AUDIENCE = 'csi-handover.io/witness';

/** What the witness sends: the pod (uid included: a re-created pod of the same name is another) and what it saw. */
export const WitnessReport = z.object({
  namespace: z.string().min(1),
  name: z.string().min(1),
  uid: z.string().min(1),
  node: z.string().min(1),
  /** MicroTime on the node's clock, as in the condition's message. */
  exitedBy: z.string().refine((s) => parseKubeTime(s) !== undefined, 'an RFC 3339 time'),
  detail: z.string().max(1024).default(''),
});
export type WitnessReport = z.infer<typeof WitnessReport>;

const POD_UID = 'authentication.kubernetes.io/pod-uid';
const NODE_NAME = 'authentication.kubernetes.io/node-name';

export type SenderVerdict = { ok: true; node: string; witness: string } | { ok: false; code: 401 | 403; reason: string };

/**
 * Who sent a report, from the API server's review of its token: a witness pod of `witnessNamespace`, Ready on a
 * Ready node (witnessedNodes), speaking for that node only. The token's node claim, where the API server adds
 * one, must name the same node.
 */
export function reportSender(review: TokenReviewStatus, witnessNamespace: string, witnessPods: readonly V1Pod[], nodes: readonly V1Node[]): SenderVerdict {
  if (review.authenticated !== true) return { ok: false, code: 401, reason: `token not authenticated: ${review.error ?? 'no reason given'}` };
  if (!(review.audiences ?? []).includes(WITNESS_AUDIENCE)) return { ok: false, code: 401, reason: `token not issued for audience ${WITNESS_AUDIENCE}` };
  const username = review.user?.username ?? '';
  if (!username.startsWith(`system:serviceaccount:${witnessNamespace}:`))
    return { ok: false, code: 403, reason: `${username || 'an unnamed user'} is not a ServiceAccount of the witness namespace ${witnessNamespace}` };
  const bound = { podUid: review.user?.extra?.[POD_UID]?.[0], username, node: review.user?.extra?.[NODE_NAME]?.[0] };
  const v = witnessBoundTo(bound, witnessNamespace, witnessPods, nodes);
  return v.ok ? { ok: true, node: v.node, witness: v.witness } : v;
}

/** The Ready witness pod a token is bound to (`podUid`, its ServiceAccount `username`, its node claim if any), and its node. */
function witnessBoundTo(
  bound: { podUid: string | undefined; username: string; node: string | undefined },
  witnessNamespace: string,
  witnessPods: readonly V1Pod[],
  nodes: readonly V1Node[],
): ClaimedWitness {
  const uid = bound.podUid;
  if (!uid) return { ok: false, code: 403, reason: 'the token is not bound to a pod' };
  const pod = witnessPods.find((p) => p.metadata?.uid === uid);
  if (!pod) return { ok: false, code: 403, reason: `the token's pod (uid ${uid}) is not a witness pod` };
  const ref = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
  if (bound.username !== `system:serviceaccount:${witnessNamespace}:${pod.spec?.serviceAccountName ?? 'default'}`)
    return { ok: false, code: 403, reason: `${bound.username} is not the ServiceAccount of ${ref}` };
  const node = pod.spec?.nodeName ?? '';
  if (!witnessedNodes([pod], nodes).has(node)) return { ok: false, code: 403, reason: `${ref} is not a Ready witness on a Ready node` };
  if (bound.node !== undefined && bound.node !== node) return { ok: false, code: 403, reason: `the token names node ${bound.node}, ${ref} runs on ${node}` };
  return { ok: true, podUid: uid, node, witness: ref };
}

/** The evidence a report from a witness on `senderNode` carries; a report about another node's pod is refused. */
export function reportEvidence(report: WitnessReport, senderNode: string): { ok: true; evidence: WitnessEvidence } | { ok: false; reason: string } {
  if (report.node !== senderNode) return { ok: false, reason: `the witness on ${senderNode} reported for node ${report.node}` };
  const exitedBy = parseKubeTime(report.exitedBy);
  if (exitedBy === undefined) return { ok: false, reason: `exitedBy ${report.exitedBy} is not a time` };
  return { ok: true, evidence: { exitedBy, node: senderNode } };
}

/** What a projected ServiceAccount token says of itself, unverified: anyone can write these. */
const TokenClaims = z.object({
  aud: z.union([z.string(), z.array(z.string())]).optional(),
  sub: z.string().optional(),
  /** Seconds since the epoch. */
  exp: z.number().optional(),
  'kubernetes.io': z
    .object({
      pod: z.object({ uid: z.string() }).optional(),
      node: z.object({ name: z.string() }).optional(),
    })
    .optional(),
});
type TokenClaims = z.infer<typeof TokenClaims>;

function unverifiedClaims(token: string): TokenClaims | undefined {
  const payload = token.split('.')[1];
  if (!payload) return undefined;
  try {
    const parsed = TokenClaims.safeParse(JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

const forWitnessNamespace = (claims: TokenClaims, witnessNamespace: string): boolean =>
  [claims.aud].flat().includes(WITNESS_AUDIENCE) && (claims.sub ?? '').startsWith(`system:serviceaccount:${witnessNamespace}:`);

export type ClaimedWitness = { ok: true; podUid: string; node: string; witness: string } | { ok: false; code: 401 | 403; reason: string };

/**
 * The witness pod a token says it is bound to, read from its unverified claims and held to the same rules as a
 * reviewed token (reportSender), not yet expired at `now`. Only a pre-filter: so that junk sent to the replicas'
 * port costs no TokenReview, and so the reviews can be counted per witness pod. The API server's review decides.
 */
export function claimedWitness(token: string, witnessNamespace: string, witnessPods: readonly V1Pod[], nodes: readonly V1Node[], now: number): ClaimedWitness {
  const claims = unverifiedClaims(token);
  if (!claims || !forWitnessNamespace(claims, witnessNamespace))
    return { ok: false, code: 401, reason: `not a token of the witness namespace for audience ${WITNESS_AUDIENCE}` };
  if (claims.exp === undefined || claims.exp * 1000 <= now) return { ok: false, code: 401, reason: 'the token has expired (or says no expiry)' };
  const bound = claims['kubernetes.io'];
  return witnessBoundTo({ podUid: bound?.pod?.uid, username: claims.sub ?? '', node: bound?.node?.name }, witnessNamespace, witnessPods, nodes);
}
