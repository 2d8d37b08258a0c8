// Whether the witness's condition on a pod can be taken at its word: only while the ValidatingAdmissionPolicy that
// holds every writer of it (config/witness/admission_policy.yaml) is in force exactly as shipped, bound with Deny
// over every pod, and the witness's own ServiceAccount is the one it lets attest. Anything else (no policy, an API
// server without the API, an edited or narrowed policy, a binding that only warns or audits, the grant bound in
// another namespace) and anyone with pods/status patch could have written it: the condition is then not evidence,
// and the operator waits for the kubelet's report (its authenticated reports still count: src/handover/witness-report.ts).
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { createHash } from 'node:crypto';
import { canonicalJson } from '../kube/same-content.js';

export const WITNESS_POLICY = 'csi-handover-witness';
/** The permission the policy asks the authorizer for: granted by the witness's ClusterRole (config/witness/rbac.yaml). */
export const ATTEST = { group: 'csi-handover.io', resource: 'containerexits', verb: 'attest' } as const;
/** The witness's ServiceAccount, by name: the policy holds every pods/status write of a ServiceAccount so named. */
export const WITNESS_SERVICE_ACCOUNT = 'csi-handover-witness';

/**
 * The digest of the shipped policy's rules (policyDigest of config/witness/admission_policy.yaml). A test fails,
 * printing the new value, when that file changes without this.
 */
export const SHIPPED_POLICY_DIGEST = '574fb74813f74ac7';

export type Trust = { trusted: true } | { trusted: false; why: string };

interface NamedExpression {
  name?: string;
  expression?: string;
}

export interface PolicyObject {
  metadata?: V1ObjectMeta;
  spec?: {
    failurePolicy?: string;
    paramKind?: unknown;
    matchConstraints?: {
      resourceRules?: { apiGroups?: string[]; apiVersions?: string[]; operations?: string[]; resources?: string[]; resourceNames?: string[] }[];
      excludeResourceRules?: unknown[];
      namespaceSelector?: Selector;
      objectSelector?: Selector;
    };
    matchConditions?: NamedExpression[];
    variables?: NamedExpression[];
    validations?: { expression?: string; message?: string; messageExpression?: string; reason?: string }[];
  };
}

export interface BindingObject {
  metadata?: V1ObjectMeta;
  spec?: {
    policyName?: string;
    validationActions?: string[];
    paramRef?: unknown;
    matchResources?: { resourceRules?: unknown[]; excludeResourceRules?: unknown[]; namespaceSelector?: Selector; objectSelector?: Selector };
  };
}

interface Selector {
  matchLabels?: Record<string, string>;
  matchExpressions?: unknown[];
}

/** The policy's rules as the API server keeps them, without what it defaults (scope, matchPolicy, empty selectors). */
export function policyDigest(policy: PolicyObject): string {
  const s = policy.spec ?? {};
  const rules = {
    failurePolicy: s.failurePolicy ?? 'Fail',
    resourceRules: (s.matchConstraints?.resourceRules ?? []).map((r) => ({
      apiGroups: r.apiGroups ?? [],
      apiVersions: r.apiVersions ?? [],
      operations: r.operations ?? [],
      resources: r.resources ?? [],
      resourceNames: r.resourceNames ?? [],
    })),
    matchConditions: (s.matchConditions ?? []).map((c) => ({ name: c.name, expression: c.expression })),
    variables: (s.variables ?? []).map((v) => ({ name: v.name, expression: v.expression })),
    validations: (s.validations ?? []).map((v) => ({ expression: v.expression, message: v.message, messageExpression: v.messageExpression, reason: v.reason })),
  };
  return createHash('sha256').update(canonicalJson(rules)).digest('hex').slice(0, 16);
}

const narrows = (sel: Selector | undefined): boolean => Object.keys(sel?.matchLabels ?? {}).length > 0 || (sel?.matchExpressions ?? []).length > 0;

/**
 * Whether the policy and binding the API server has are in force as shipped, and the witness's ServiceAccount may
 * attest (`mayAttest`: a SubjectAccessReview's answer; undefined when it could not be asked).
 */
export function witnessPolicyTrust(
  policy: PolicyObject | undefined,
  binding: BindingObject | undefined,
  mayAttest: boolean | undefined,
  witness: string,
  shippedDigest = SHIPPED_POLICY_DIGEST,
): Trust {
  const no = (why: string): Trust => ({ trusted: false, why });
  if (!policy) return no(`no ValidatingAdmissionPolicy ${WITNESS_POLICY}`);
  if (policy.metadata?.deletionTimestamp) return no(`ValidatingAdmissionPolicy ${WITNESS_POLICY} is being deleted`);
  const spec = policy.spec ?? {};
  if (spec.paramKind !== undefined) return no(`ValidatingAdmissionPolicy ${WITNESS_POLICY} takes parameters, which the shipped one does not`);
  const mc = spec.matchConstraints;
  if ((mc?.excludeResourceRules ?? []).length || narrows(mc?.namespaceSelector) || narrows(mc?.objectSelector))
    return no(`ValidatingAdmissionPolicy ${WITNESS_POLICY} leaves some pods out (a selector or an exclusion)`);
  const digest = policyDigest(policy);
  if (digest !== shippedDigest)
    return no(`ValidatingAdmissionPolicy ${WITNESS_POLICY} is not the one shipped (its rules' digest is ${digest}, not ${shippedDigest})`);
  if (!binding) return no(`no ValidatingAdmissionPolicyBinding ${WITNESS_POLICY}`);
  if (binding.metadata?.deletionTimestamp) return no(`ValidatingAdmissionPolicyBinding ${WITNESS_POLICY} is being deleted`);
  const b = binding.spec ?? {};
  if (b.policyName !== WITNESS_POLICY) return no(`ValidatingAdmissionPolicyBinding ${WITNESS_POLICY} binds ${b.policyName ?? 'no policy'}`);
  if (!(b.validationActions ?? []).includes('Deny'))
    return no(`ValidatingAdmissionPolicyBinding ${WITNESS_POLICY} does not deny (validationActions: ${(b.validationActions ?? []).join(', ') || 'none'})`);
  if (b.paramRef !== undefined) return no(`ValidatingAdmissionPolicyBinding ${WITNESS_POLICY} names parameters`);
  const mr = b.matchResources;
  if ((mr?.resourceRules ?? []).length || (mr?.excludeResourceRules ?? []).length || narrows(mr?.namespaceSelector) || narrows(mr?.objectSelector))
    return no(`ValidatingAdmissionPolicyBinding ${WITNESS_POLICY} narrows what the policy matches`);
  if (mayAttest === undefined) return no(`could not ask whether ${witness} may ${ATTEST.verb} ${ATTEST.resource}.${ATTEST.group}`);
  if (!mayAttest)
    return no(`${witness} may not ${ATTEST.verb} ${ATTEST.resource}.${ATTEST.group}: the witness's ClusterRole is bound elsewhere, or not at all`);
  return { trusted: true };
}
