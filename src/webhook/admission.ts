// The admission webhook's wire format: an AdmissionReview (admission.k8s.io/v1) read with zod, and the answer —
// always allowed, with the JSON patch the handover engine asks for (src/handover/gate.ts: the gate and what the
// pod waits for), or no patch at all. Nothing here can refuse a pod: an error answers "allowed, unchanged".
import type { V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';

export const AdmissionReview = z.object({
  apiVersion: z.literal('admission.k8s.io/v1'),
  kind: z.literal('AdmissionReview'),
  request: z.object({
    uid: z.string().min(1),
    kind: z.object({ group: z.string(), version: z.string(), kind: z.string() }),
    operation: z.string(),
    namespace: z.string().optional(),
    dryRun: z.boolean().optional(),
    object: z
      .object({
        apiVersion: z.string().optional(),
        kind: z.string().optional(),
        metadata: z
          .object({
            name: z.string().optional(),
            generateName: z.string().optional(),
            namespace: z.string().optional(),
            labels: z.record(z.string(), z.string()).optional(),
            annotations: z.record(z.string(), z.string()).optional(),
          })
          .loose()
          .optional(),
        spec: z
          .object({
            nodeName: z.string().optional(),
            schedulingGates: z.array(z.object({ name: z.string() })).optional(),
          })
          .loose()
          .optional(),
      })
      .loose(),
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
