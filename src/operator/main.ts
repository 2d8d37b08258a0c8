// csi-handover operator entry point: configuration, client, endpoints, signals. The work is in operator.ts.
import { createServer } from 'node:http';
import { loadConfig } from '../config.js';
import { type ClusterAccess, inClusterAccess } from '../kube/config.js';
import { KubeHttp } from '../kube/http.js';
import { makeLogger } from '../log.js';
import { countRequestsOf, makeMetrics } from '../metrics.js';
import { Operator } from './operator.js';

let cfg;
try {
  cfg = loadConfig(process.argv.slice(2), process.env);
} catch (err) {
  console.error(String(err instanceof Error ? err.message : err));
  process.exit(2);
}
const log = makeLogger('csi-handover', cfg.logLevel).child({ identity: cfg.identity });
let access: ClusterAccess;
try {
  access = cfg.kubeconfig ? (await import('../kube/kubeconfig.js')).kubeconfigAccess(cfg.kubeconfig) : inClusterAccess(process.env);
} catch (err) {
  log.fatal({ err: String(err instanceof Error ? err.message : err) }, 'cannot reach the API server');
  process.exit(2);
}
const metrics = makeMetrics();
const http = new KubeHttp(access, countRequestsOf(metrics, 'controllers'));
const operator = new Operator(cfg, http, log, metrics, (code) => process.exit(code));

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/healthz') {
    res.writeHead(200).end('ok');
  } else if (path === '/readyz') {
    const { ready, reason } = operator.readiness();
    res.writeHead(ready ? 200 : 503).end(reason);
  } else if (path === '/metrics') {
    metrics.registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  } else {
    res.writeHead(404).end('not found');
  }
});
server.listen(cfg.httpPort, cfg.bindAddress, () =>
  log.info({ address: cfg.bindAddress, port: cfg.httpPort, mode: cfg.mode }, 'serving /healthz, /readyz, /metrics'),
);

/**
 * A shutdown that cannot stop its work in this time exits without releasing the lease: the standby takes it when
 * it expires, as after a crash. Waiting longer would keep the lease renewed by a replica that does no work, until
 * the kubelet's SIGKILL: up to a whole grace period (30 s by default) with no leader acting.
 */
const SHUTDOWN_TIMEOUT_MS = 5_000;

let stopping = false;
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: stopping work, then releasing the lease');
    setTimeout(() => {
      log.error(
        { waitingFor: operator.shutdownStage, timeoutMs: SHUTDOWN_TIMEOUT_MS },
        'work did not stop in time: exiting without releasing the lease, which expires as after a crash',
      );
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS).unref();
    void operator
      .shutdown()
      .then(() => {
        log.info('shutdown complete');
        server.close();
        process.exit(0);
      })
      .catch((err: unknown) => {
        log.error({ err: String(err) }, 'shutdown failed');
        process.exit(1);
      });
  });
}

operator.start().catch((err: unknown) => {
  log.fatal({ err: String(err) }, 'operator failed to start');
  process.exit(1);
});
