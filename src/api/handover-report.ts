// CSIHandoverReport (csi-handover.io/v1alpha1, cluster-scoped, one per driver, named after it): the full handover
// report. The ClusterCSIDriver's schema is another team's (OpenShift's CRD declares no field for it), so the
// report lives here, owned by its ClusterCSIDriver: the garbage collector removes it with its CR.
import { z } from 'zod';

export const REPORT_GROUP = 'csi-handover.io';
export const REPORT_VERSION = 'v1alpha1';
export const REPORT_KIND = 'CSIHandoverReport';
export const REPORT_RESOURCE = 'csihandoverreports';
export const REPORT_API_VERSION = `${REPORT_GROUP}/${REPORT_VERSION}`;
export const REPORT_COLLECTION_PATH = `/apis/${REPORT_GROUP}/${REPORT_VERSION}/${REPORT_RESOURCE}`;
export const reportPath = (driver: string): string => `${REPORT_COLLECTION_PATH}/${encodeURIComponent(driver)}`;

/** The report object as the operator reads it: which CR owns it, and its status (read by report.ts's reportFromStatus). */
export const HandoverReportObject = z.object({
  metadata: z.object({
    name: z.string(),
    uid: z.string().optional(),
    ownerReferences: z.array(z.object({ kind: z.string(), name: z.string(), uid: z.string(), apiVersion: z.string() })).optional(),
  }),
  status: z.unknown().optional(),
});
export type HandoverReportObject = z.infer<typeof HandoverReportObject>;

/** The UID of the ClusterCSIDriver a report belongs to, when it names one. */
export function reportOwnerUid(o: HandoverReportObject): string | undefined {
  return o.metadata.ownerReferences?.find((r) => r.kind === 'ClusterCSIDriver' && r.name === o.metadata.name)?.uid;
}
