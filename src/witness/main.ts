// `csi-handover witness`: the node witness's entry point (a DaemonSet beside the operator, from the same image).
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { desiredDeletionCost } from '../handover/deletion-cost.js';
import { type ClusterAccess, inClusterAccess } from '../kube/config.js';
import { KubeHttp } from '../kube/http.js';
import { makeLogger } from '../log.js';
import { detectLayout } from './cgroups.js';
import { makeWitnessMetrics } from './metrics.js';
import { OperatorChannel } from './report.js';
import { nodePods, Witness } from './witness.js';
import { describeIssues } from '../issues.js';

/** Where config/witness projects the token for the operator's audience. */
const REPORT_TOKEN = '/var/run/secrets/csi-handover.io/witness/token';

const WitnessConfig = z.object({
  node: z.string().min(1, 'needs --node-name or NODE_NAME (the downward API: spec.nodeName)'),
  kubeconfig: z.string().optional(),
  cgroupFs: z.string().min(1),
  cgroupRoot: z.string().optional(),
  bundles: z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean),
    )
    .refine((l) => l.length > 0 && l.every((t) => t.includes('{id}')), 'comma-separated paths, each with {id}'),
  pollMs: z.coerce.number().int().min(5).max(1000),
  httpPort: z.coerce.number().int().min(1).max(65535),
  operatorNamespace: z.string().min(1),
  operatorService: z.string().min(1),
  webhookConfiguration: z.string().min(1),
  /** Empty: no reports straight to the operator, the condition only. */
  reportToken: z.string(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace']),
});

const { values } = parseArgs({
  args: process.argv.slice(3),
  options: {
    'node-name': { type: 'string' },
    kubeconfig: { type: 'string' },
    'cgroup-fs': { type: 'string' },
    'cgroup-root': { type: 'string' },
    bundles: { type: 'string' },
    'poll-interval-ms': { type: 'string' },
    'http-port': { type: 'string' },
    'operator-namespace': { type: 'string' },
    'operator-service': { type: 'string' },
    'webhook-configuration': { type: 'string' },
    'report-token': { type: 'string' },
    'log-level': { type: 'string' },
  },
  strict: true,
});
const parsed = WitnessConfig.safeParse({
  node: values['node-name'] ?? process.env.NODE_NAME ?? '',
  kubeconfig: values.kubeconfig ?? process.env.KUBECONFIG,
  cgroupFs: values['cgroup-fs'] ?? '/host/sys/fs/cgroup',
  cgroupRoot: values['cgroup-root'],
  // containerd's task bundles and CRI-O's container user data (config/witness mounts both; a node has one of them).
  bundles: values.bundles ?? '/host/run/containerd/io.containerd.runtime.v2.task/k8s.io/{id},/host/run/containers/storage/overlay-containers/{id}/userdata',
  pollMs: values['poll-interval-ms'] ?? '20',
  httpPort: values['http-port'] ?? '8082',
  operatorNamespace: values['operator-namespace'] ?? 'csi-handover',
  operatorService: values['operator-service'] ?? 'csi-handover-webhook',
  webhookConfiguration: values['webhook-configuration'] ?? 'csi-handover',
  reportToken: values['report-token'] ?? REPORT_TOKEN,
  logLevel: values['log-level'] ?? process.env.LOG_LEVEL ?? 'info',
});
if (!parsed.success) {
  console.error(`csi-handover witness: ${describeIssues(parsed.error)}`);
  process.exit(2);
}
const cfg = parsed.data;
const log = makeLogger('csi-handover-witness', cfg.logLevel).child({ node: cfg.node });

let access: ClusterAccess;
let layout;
try {
  access = cfg.kubeconfig ? (await import('../kube/kubeconfig.js')).kubeconfigAccess(cfg.kubeconfig) : inClusterAccess(process.env);
  layout = await detectLayout(cfg.cgroupFs, cfg.cgroupRoot, readFileSync('/proc/self/cgroup', 'utf8'));
} catch (err) {
  log.fatal({ err: String(err instanceof Error ? err.message : err) }, 'cannot start');
  process.exit(2);
}
log.info({ layout, bundles: cfg.bundles, pollMs: cfg.pollMs }, 'witnessing container exits of leaders deleted on this node');

const metrics = makeWitnessMetrics();
const http = new KubeHttp(access);
const channel = cfg.reportToken
  ? new OperatorChannel(
      http,
      { namespace: cfg.operatorNamespace, service: cfg.operatorService, webhookConfiguration: cfg.webhookConfiguration, tokenFile: cfg.reportToken },
      log.child({ component: 'report' }),
    )
  : undefined;
if (channel && !existsSync(cfg.reportToken)) log.warn({ tokenFile: cfg.reportToken }, 'no token to report to the operator with: the condition on the pod only');
const witness = new Witness(
  http,
  { node: cfg.node, layout, bundleTemplates: cfg.bundles, pollMs: cfg.pollMs, leaderCost: desiredDeletionCost(1) ?? '', channel },
  log,
  metrics,
  nodePods(http, cfg.node, log),
);
const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/healthz') res.writeHead(200).end('ok');
  else if (path === '/readyz') res.writeHead(witness.hasSynced() ? 200 : 503).end(witness.hasSynced() ? 'ok' : 'pods not listed yet');
  else if (path === '/metrics') {
    metrics.registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  } else res.writeHead(404).end('not found');
});
server.listen(cfg.httpPort);
channel?.start();
witness.start();
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    witness.stop();
    channel?.stop();
    server.close();
    process.exit(0);
  });
}
