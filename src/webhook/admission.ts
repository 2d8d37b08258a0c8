// The admission webhook's wire format and its one mutation: an AdmissionReview (admission.k8s.io/v1) read with
// zod, and the answer — always allowed, with a JSON patch that adds the handover scheduling gate and says what
// the pod waits for, or no patch at all. Nothing here can refuse a pod: an error answers "allowed, unchanged".
import type { V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';
import { HANDOVER_GATE, HANDOVER_STATE } from '../api/names.js';

export const AdmissionReview = z.object({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: z.object({
    uid: z.string().min(1),
    kind: z.object({ group: z.string(), version: z.string(), kind: z.string() }),
    operation: z.string(),
    namespace: z.string().optional(),
    dryRun: z.boolean().optional(),
    object: z.object({
      apiVersion: z.string().optional(),
      kind: z.string().optional(),
      metadata: z.object({
        name: z.string().optional(),
        generateName: z.string().optional(),
        namespace: z.string().optional(),
        labels: z.record(z.string(), z.string()).optional(),
        annotations: z.record(z.string(), z.string()).optional(),
      }).loose().optional(),
      spec: z.object({
        nodeName: z.string().optional(),
        schedulingGates: z.array(z.object({ name: z.string() })).optional(),
      }).loose().optional(),
    }).loose(),
  }),
});
export type AdmissionReview = z.infer<typeof AdmissionReview>;

/** The pod of a review, with its namespace filled in (the API server leaves it to the request for some clients). */
export function podOf(review: AdmissionReview): V1Pod {
  const pod = structuredClone(review.request.object) as V1Pod;
  pod.metadata = { ...pod.metadata, namespace: pod.metadata?.namespace || review.request.namespace };
  return pod;
}

export function allowed(uid: string, patch?: unknown[]): unknown {
  const response: Record<string, unknown> = { uid, allowed: true };
  if (patch && patch.length) {
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(patch)).toString('base64');
  }
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

const escapePointer = (s: string): string => s.replaceAll('~', '~0').replaceAll('/', '~1');

/** Sets the state annotation only (a pod admitted ungated while a handover is pending says why). */
export function statePatch(pod: V1Pod, state: string): unknown[] {
  return pod.metadata?.annotations
    ? [{ op: 'add', path: `/metadata/annotations/${escapePointer(HANDOVER_STATE)}`, value: state }]
    : [{ op: 'add', path: '/metadata/annotations', value: { [HANDOVER_STATE]: state } }];
}

/**
 * Adds the gate and the state annotation. `undefined` for a pod the gate cannot apply to: one created bound to
 * a node (the API server forbids scheduling gates there) or already gated by us.
 */
export function gatePatch(pod: V1Pod, message: string): unknown[] | undefined {
  if (pod.spec?.nodeName) return undefined;
  const gates = pod.spec?.schedulingGates;
  if (gates?.some((g) => g.name === HANDOVER_GATE)) return undefined;
  const ops = [
    gates ? { op: 'add', path: '/spec/schedulingGates/-', value: { name: HANDOVER_GATE } } : { op: 'add', path: '/spec/schedulingGates', value: [{ name: HANDOVER_GATE }] },
  ];
  return [...ops, ...statePatch(pod, message)];
}
