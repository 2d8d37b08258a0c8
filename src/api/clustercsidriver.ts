// ClusterCSIDriver (operator.openshift.io/v1) as the operator reads it. The shape is checked leniently at
// the boundary (a CR must never crash the operator); the values are then validated separately, so a value
// that an older or foreign CRD let through becomes a Degraded condition that names the field.
import { z } from 'zod';
import { isLogLevel, LOG_LEVELS, type LogLevel } from '../loglevel/verbosity.js';

export const GROUP = 'operator.openshift.io';
export const VERSION = 'v1';
export const KIND = 'ClusterCSIDriver';
export const RESOURCE = 'clustercsidrivers';
export const COLLECTION_PATH = `/apis/${GROUP}/${VERSION}/${RESOURCE}`;
export const objectPath = (name: string): string => `${COLLECTION_PATH}/${encodeURIComponent(name)}`;

export const Condition = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  lastTransitionTime: z.string().optional(),
  reason: z.string().optional(),
  message: z.string().optional(),
});
export type Condition = z.infer<typeof Condition>;

export const GenerationStatus = z.object({
  group: z.string(),
  resource: z.string(),
  namespace: z.string(),
  name: z.string(),
  lastGeneration: z.number().optional(),
  hash: z.string().optional(),
});
export type GenerationStatus = z.infer<typeof GenerationStatus>;

export const ClusterCSIDriver = z.object({
  apiVersion: z.string().optional(),
  kind: z.string().optional(),
  metadata: z.object({
    name: z.string(),
    generation: z.number().optional(),
    resourceVersion: z.string().optional(),
    uid: z.string().optional(),
    deletionTimestamp: z.string().optional(),
  }),
  spec: z
    .record(z.string(), z.unknown())
    .nullish()
    .transform((s) => s ?? {}),
  status: z
    .object({
      observedGeneration: z.number().optional(),
      conditions: z.array(Condition).nullish(),
      generations: z.array(GenerationStatus).nullish(),
    })
    .passthrough()
    .nullish(),
});
export type ClusterCSIDriver = z.infer<typeof ClusterCSIDriver>;

export const MANAGEMENT_STATES = ['Managed', 'Unmanaged', 'Force', 'Removed'] as const;
export type ManagementState = (typeof MANAGEMENT_STATES)[number];

export interface DriverSpec {
  managementState: ManagementState;
  logLevel: LogLevel;
  operatorLogLevel: LogLevel;
}

export type SpecValidation = { ok: true; spec: DriverSpec } | { ok: false; field: string; value: unknown; message: string };

/** The spec's values, or the first field whose value the operator cannot act on. Unset means the default. */
export function validateSpec(spec: Record<string, unknown>): SpecValidation {
  const managementState = spec.managementState ?? 'Managed';
  if (typeof managementState !== 'string' || !(MANAGEMENT_STATES as readonly string[]).includes(managementState)) {
    return invalid('spec.managementState', managementState, MANAGEMENT_STATES);
  }
  const logLevel = spec.logLevel ?? 'Normal';
  if (!isLogLevel(logLevel)) return invalid('spec.logLevel', logLevel, LOG_LEVELS);
  const operatorLogLevel = spec.operatorLogLevel ?? 'Normal';
  if (!isLogLevel(operatorLogLevel)) return invalid('spec.operatorLogLevel', operatorLogLevel, LOG_LEVELS);
  return { ok: true, spec: { managementState: managementState as ManagementState, logLevel, operatorLogLevel } };
}

function invalid(field: string, value: unknown, allowed: readonly string[]): SpecValidation {
  return {
    ok: false,
    field,
    value,
    message: `${field}: ${JSON.stringify(value)} is not one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}`,
  };
}
