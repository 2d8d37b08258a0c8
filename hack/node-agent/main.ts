// Entry point of the node agent (see agent.ts). Flags:
//   --kubeconfig F --bin-dir D --state-dir D --images F [--nodes node-1,node-2] [--csi-drivers a,b]
//   [--control-port 20280] [--pod-network 127.1] [--max-pods 5000] [--lease-interval-ms 10000] [--restart-backoff-ms 10000]
// NODE_AGENT_PORT, NODE_AGENT_POD_NETWORK and NODE_AGENT_MAX_PODS set the defaults of the flags they name,
// so a second local cluster (its own ports and pod addresses) or a scale benchmark needs no other change.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { z } from 'zod';
import { KubeHttp } from '../../src/kube/http.js';
import { makeLogger } from '../../src/log.js';
import { NodeAgent } from './agent.js';

const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    'bin-dir': { type: 'string' },
    'state-dir': { type: 'string' },
    images: { type: 'string' },
    nodes: { type: 'string', default: 'node-1,node-2' },
    'csi-drivers': { type: 'string', default: 'hostpath.csi.k8s.io' },
    'control-port': { type: 'string', default: process.env.NODE_AGENT_PORT ?? '20280' },
    'pod-network': { type: 'string', default: process.env.NODE_AGENT_POD_NETWORK ?? '127.1' },
    'max-pods': { type: 'string', default: process.env.NODE_AGENT_MAX_PODS ?? '5000' },
    'lease-interval-ms': { type: 'string', default: '10000' },
    'restart-backoff-ms': { type: 'string', default: '10000' },
  },
});

const Flags = z.object({
  kubeconfig: z.string().min(1),
  'bin-dir': z.string().min(1),
  'state-dir': z.string().min(1),
  images: z.string().min(1),
  nodes: z.string().transform((s) => s.split(',').filter(Boolean)),
  'csi-drivers': z.string().transform((s) => s.split(',').filter(Boolean)),
  'control-port': z.coerce.number().int().positive(),
  'pod-network': z.string().regex(/^127\.(25[0-5]|2[0-4]\d|1?\d?\d)$/, 'two octets in 127.0.0.0/8, e.g. 127.1'),
  'max-pods': z.coerce.number().int().positive(),
  'lease-interval-ms': z.coerce.number().int().positive(),
  'restart-backoff-ms': z.coerce.number().int().positive(),
});
const ImageFile = z.object({ images: z.record(z.string(), z.string()) });

const log = makeLogger('node-agent');
const flags = Flags.parse(values);
// Binaries named with a leading ./ or ../ are relative to the image file (scripts of this repository).
const images = ImageFile.parse(JSON.parse(readFileSync(flags.images, 'utf8')));
for (const [image, binary] of Object.entries(images.images)) {
  if (binary.startsWith('./') || binary.startsWith('../')) images.images[image] = resolve(dirname(flags.images), binary);
}
const kc = new KubeConfig();
kc.loadFromFile(flags.kubeconfig);

const agent = new NodeAgent(
  new KubeHttp(kc),
  {
    nodes: flags.nodes,
    binDir: flags['bin-dir'],
    stateDir: flags['state-dir'],
    logDir: join(flags['state-dir'], '..', 'logs', 'pods'),
    images,
    csiDrivers: flags['csi-drivers'],
    controlPort: flags['control-port'],
    podNetwork: flags['pod-network'],
    maxPods: flags['max-pods'],
    leaseIntervalMs: flags['lease-interval-ms'],
    restartBackoff: { baseMs: flags['restart-backoff-ms'], maxMs: 300_000 },
  },
  log,
);

let stopping = false;
for (const sig of ['SIGTERM', 'SIGINT'] as const) {
  process.on(sig, () => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: sig }, 'shutting down: stopping pod processes');
    void agent.shutdown(5).finally(() => process.exit(0));
  });
}

await agent.start();
