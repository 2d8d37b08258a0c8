// Operator configuration from flags, falling back to environment variables, validated with zod.
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { describeIssues } from './issues.js';

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const duration = z
  .string()
  .regex(/^\d+(\.\d+)?(ms|s|m|h|d)$/, 'a duration such as 500ms, 15s, 2m, 1h or 90d')
  .transform((s) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(s);
    return Number(m?.[1] ?? 0) * UNIT_MS[(m?.[2] ?? 'ms') as keyof typeof UNIT_MS];
  });
const csv = z.string().transform((s) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean),
);
const bool = z.enum(['true', 'false']).transform((v) => v === 'true');

export const Config = z
  .object({
    kubeconfig: z.string().optional(),
    mode: z.enum(['standalone', 'companion']),
    namespaces: csv,
    leaderElection: bool,
    leaderElectionNamespace: z.string().min(1, 'needs --leader-election-namespace or POD_NAMESPACE'),
    leaseName: z.string().min(1),
    leaseDuration: duration,
    renewDeadline: duration,
    retryPeriod: duration,
    identity: z.string().min(1),
    bindAddress: z.string().min(1),
    httpPort: z.coerce.number().int().min(1).max(65535),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']),
    handoverGate: bool,
    gateTimeout: duration,
    earlyStart: bool,
    webhookPort: z.coerce.number().int().min(0).max(65535),
    webhookCertSource: z.enum(['self', 'service-ca', 'olm']),
    webhookSecret: z.string().min(1),
    webhookService: z.string().min(1),
    webhookConfiguration: z.string().min(1),
    webhookCertValidity: duration.refine((ms) => ms >= 60_000, 'at least 1m'),
    operatorDeployment: z.string().min(1),
    witnessNamespace: z.string().min(1),
    witnessClockSkew: duration.refine((ms) => ms <= 10_000, 'at most 10s'),
  })
  .refine((c) => c.renewDeadline < c.leaseDuration, { message: 'renew deadline must be shorter than the lease duration', path: ['renewDeadline'] })
  .refine((c) => c.retryPeriod < c.renewDeadline, { message: 'retry period must be shorter than the renew deadline', path: ['retryPeriod'] });
export type Config = z.infer<typeof Config>;

const flagNames = {
  kubeconfig: ['kubeconfig', 'KUBECONFIG', undefined],
  mode: ['mode', 'CSI_HANDOVER_MODE', 'standalone'],
  namespaces: ['namespaces', 'WATCH_NAMESPACES', ''],
  leaderElection: ['leader-election', 'LEADER_ELECTION', 'true'],
  leaderElectionNamespace: ['leader-election-namespace', 'POD_NAMESPACE', 'csi-handover'],
  leaseName: ['lease-name', 'LEASE_NAME', 'csi-handover-leader'],
  leaseDuration: ['lease-duration', 'LEASE_DURATION', '15s'],
  renewDeadline: ['renew-deadline', 'RENEW_DEADLINE', '10s'],
  // The CSI sidecars' own defaults (15s / 10s / 5s). A standby watches the Lease and tries the moment it is
  // released, so the retry period paces only the leader's renewals: 12 writes a minute, where 2s made 30.
  retryPeriod: ['retry-period', 'RETRY_PERIOD', '5s'],
  identity: ['identity', 'POD_NAME', hostname()],
  bindAddress: ['bind-address', 'BIND_ADDRESS', '0.0.0.0'],
  httpPort: ['http-port', 'HTTP_PORT', '8080'],
  logLevel: ['log-level', 'LOG_LEVEL', 'info'],
  handoverGate: ['handover-gate', 'HANDOVER_GATE', 'true'],
  gateTimeout: ['gate-timeout', 'GATE_TIMEOUT', '60s'],
  // Start new pods before the release where the operator predicts the old leader is released first
  // (src/handover/overlap.ts). Off by default: it saves a few hundred ms, and a wrong prediction costs a retry period.
  earlyStart: ['early-start', 'EARLY_START', 'false'],
  // The pod admission webhook (0: not served). Its certificates: issued and rotated by the operator (self), or
  // by OpenShift's service-ca operator, which writes the Secret and injects the caBundle (service-ca), or by OLM,
  // which also owns the webhook configuration it generates from the CSV (olm: bundle/).
  webhookPort: ['webhook-port', 'WEBHOOK_PORT', '9443'],
  webhookCertSource: ['webhook-cert-source', 'WEBHOOK_CERT_SOURCE', 'self'],
  webhookSecret: ['webhook-secret', 'WEBHOOK_SECRET', 'csi-handover-webhook-cert'],
  webhookService: ['webhook-service', 'WEBHOOK_SERVICE', 'csi-handover-webhook'],
  webhookConfiguration: ['webhook-configuration', 'WEBHOOK_CONFIGURATION', 'csi-handover'],
  webhookCertValidity: ['webhook-cert-validity', 'WEBHOOK_CERT_VALIDITY', '90d'],
  // The operator's own Deployment: gone or scaled to zero at shutdown means "going away", and its gates are lifted.
  operatorDeployment: ['operator-deployment', 'OPERATOR_DEPLOYMENT', 'csi-handover'],
  witnessNamespace: ['witness-namespace', 'WITNESS_NAMESPACE', 'csi-handover-witness'],
  // How far a node's clock may be from the API server's and the operator's when the witness's instant is bounded
  // (src/handover/witness-evidence.ts judgeEvidence).
  witnessClockSkew: ['witness-clock-skew', 'WITNESS_CLOCK_SKEW', '1s'],
} as const satisfies Record<keyof Config, readonly [string, string, string | undefined]>;

/** Flags win over environment variables, which win over defaults. Throws a readable error on bad input. */
export function loadConfig(argv: string[], env: NodeJS.ProcessEnv): Config {
  const { values } = parseArgs({
    args: argv,
    options: Object.fromEntries(Object.values(flagNames).map(([flag]) => [flag, { type: 'string' as const }])),
    strict: true,
  });
  const raw = Object.fromEntries(
    Object.entries(flagNames).map(([key, [flag, envName, def]]) => [key, (values as Record<string, string | undefined>)[flag] ?? env[envName] ?? def]),
  );
  const parsed = Config.safeParse(raw);
  if (!parsed.success) {
    throw new Error(`invalid configuration: ${describeIssues(parsed.error)}`);
  }
  return parsed.data;
}
