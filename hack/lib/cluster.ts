// Helpers shared by the cluster tests, the demo and the benchmarks: paths of the local cluster, a client
// for it, kubectl, the nodes' own record of their containers and their fault switches, and condition waits.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments, stringify } from 'yaml';
import { DRIVER_LABEL } from '../../src/api/names.js';
import { kubeconfigAccess } from '../../src/kube/kubeconfig.js';
import { KubeHttp, type Query } from '../../src/kube/http.js';
import type { NodeEvent } from './node-events.js';

const run = promisify(execFile);

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const localDir = process.env.CSI_HANDOVER_LOCAL ?? join(repoRoot, '.local');

/**
 * Ports and networks for a throwaway cluster beside the shared one (hack/README.md, "A second cluster"): add
 * CSI_HANDOVER_LOCAL, its own state directory outside `.local`.
 */
export const SECOND_CLUSTER_ENV = {
  NODE_NET: '10.201',
  POD_NET: '10.245',
  ETCD_PORT: '24379',
  ETCD_PEER_PORT: '24380',
  APISERVER_PORT: '18443',
  KCM_PORT: '22257',
  SCHEDULER_PORT: '22259',
  // Its tests run shell pods only (hack/nodes.sh imports just these and the pause image).
  NODE_IMAGES: 'csi-handover.local/shell:v1',
} as const;
export const kubeconfigPath = join(localDir, 'kubeconfig');
export const binDir = join(process.env.CSI_HANDOVER_CACHE ?? join(homedir(), '.cache', 'csi-handover'), 'bin');

export function clusterHttp(): KubeHttp {
  if (!existsSync(kubeconfigPath)) throw new Error(`no kubeconfig at ${kubeconfigPath}: run make cluster-up`);
  return new KubeHttp(kubeconfigAccess(kubeconfigPath));
}

export async function kubectl(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run(join(binDir, 'kubectl'), args, {
      env: { ...process.env, KUBECONFIG: kubeconfigPath },
      maxBuffer: 64 * 1024 * 1024,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(' ')}: ${e.stderr?.trim() || e.message}`, { cause: err });
  }
}

/** An object of a rendered kustomization, as far as the edits before an apply look into it. */
export interface Rendered {
  kind: string;
  metadata: { name: string };
  spec?: {
    template?: {
      metadata?: { annotations?: Record<string, string> };
      spec?: { terminationGracePeriodSeconds?: number; containers?: { name: string; args?: string[] }[] };
    };
  };
}

/** The objects a kustomization renders to. */
export async function renderKustomization(dir: string): Promise<Rendered[]> {
  return parseAllDocuments(await kubectl('kustomize', dir)).map((d) => d.toJS() as Rendered);
}

/** `kubectl <args> -f <file of objs>`, the file written for the call and removed after it. */
export async function kubectlOnObjects(objs: readonly object[], ...args: string[]): Promise<string> {
  const tmp = mkdtempSync(join(tmpdir(), 'csi-handover-objects-'));
  try {
    const file = join(tmp, 'objects.yaml');
    writeFileSync(file, objs.map((o) => stringify(o)).join('---\n'));
    return await kubectl(...args, '-f', file);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** `kubectl apply -k dir` with the rendered objects edited first: one write, so at most one rollout, per object. */
export async function applyKustomization(dir: string, edit: (o: Rendered) => void): Promise<void> {
  const objs = await renderKustomization(dir);
  for (const o of objs) edit(o);
  await kubectlOnObjects(objs, 'apply');
}

/**
 * The environment for hack/cluster.sh and hack/nodes.sh while the cluster runs: its binaries are those in binDir
 * (the `up` that started it installed them), so a script need not check every build's key again (3 s a call).
 */
const scriptEnv = (): NodeJS.ProcessEnv => ({ ...process.env, CSI_HANDOVER_BIN_DIR: process.env.CSI_HANDOVER_BIN_DIR ?? binDir });

export async function clusterScript(...args: string[]): Promise<string> {
  const { stdout } = await run(join(repoRoot, 'hack', 'cluster.sh'), args, { env: scriptEnv(), maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs}ms waiting for ${what}${lastError ? ` (last error: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)})` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export type { NodeEvent };

/**
 * Every container start, exit and stop signal the nodes recorded, oldest first: on real nodes containerd's
 * events and the kubelet's own log (hack/node-record.ts).
 */
export async function nodeEvents(stateDir = localDir): Promise<NodeEvent[]> {
  const dir = join(stateDir, 'nodes');
  const events: NodeEvent[] = [];
  for (const node of existsSync(dir) ? readdirSync(dir) : []) {
    const file = join(dir, node, 'record.jsonl');
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) if (line) events.push(JSON.parse(line) as NodeEvent);
  }
  return events.sort((a, b) => Date.parse(a.t) - Date.parse(b.t));
}

/**
 * A partitioned node: its kubelet stops talking to the API server (frozen with SIGSTOP) while containerd keeps
 * its containers running; `false` lets it talk again.
 */
export async function setPartitioned(node: string, partitioned: boolean): Promise<void> {
  await run(join(repoRoot, 'hack', 'nodes.sh'), [partitioned ? 'freeze' : 'thaw', node], { env: scriptEnv() });
}

/**
 * Stops or starts one of a real node's own processes (hack/nodes.sh stop|start); containers keep running.
 * `runtime`: the node's containerd or crio (their containers live on under containerd's shims or conmon).
 */
export async function nodeComponent(action: 'stop' | 'start', node: string, component: 'kubelet' | 'runtime'): Promise<void> {
  await run(join(repoRoot, 'hack', 'nodes.sh'), [action, node, component], { env: scriptEnv(), maxBuffer: 16 << 20 });
}

/** Each real node's container runtime, as its kubelet reports it: node name → `containerd` or `cri-o`. */
export async function nodeRuntimes(http: KubeHttp): Promise<Map<string, string>> {
  const nodes = await http.get<{ items: { metadata?: { name?: string }; status?: { nodeInfo?: { containerRuntimeVersion?: string } } }[] }>('/api/v1/nodes', {
    labelSelector: '!csi-handover.io/kwok',
  });
  return new Map(nodes.items.map((n) => [n.metadata?.name ?? '', n.status?.nodeInfo?.containerRuntimeVersion?.split('://')[0] ?? '']));
}

export const samplesDir = join(repoRoot, 'config', 'samples', 'hostpath');
export const SAMPLE_NAMESPACE = 'csi-hostpath';
export const SAMPLE_DEPLOYMENT = 'csi-hostpath-controller';
export const SAMPLE_DRIVER = 'hostpath.csi.k8s.io';

/** The five controller sidecar leases of the sample driver (facts §1, dots sanitised to dashes). */
export const SAMPLE_LEASES = {
  'csi-provisioner': 'hostpath-csi-k8s-io',
  'csi-attacher': 'external-attacher-leader-hostpath-csi-k8s-io',
  'csi-resizer': 'external-resizer-hostpath-csi-k8s-io',
  'csi-snapshotter': 'external-snapshotter-leader-hostpath-csi-k8s-io',
  'csi-external-health-monitor-controller': 'external-health-monitor-leader-hostpath-csi-k8s-io',
} as const;

/** The sample's snapshot-controller (its own Deployment, the sixth sidecar), managed only once labelled for the driver. */
export const SAMPLE_SNAPSHOT_CONTROLLER = { deployment: 'snapshot-controller', container: 'snapshot-controller', lease: 'snapshot-controller-leader' } as const;

/** All six sidecars' leases, by container: the five of the controller Deployment and the snapshot-controller's. */
export const SAMPLE_SIDECAR_LEASES: Readonly<Record<string, string>> = {
  ...SAMPLE_LEASES,
  [SAMPLE_SNAPSHOT_CONTROLLER.container]: SAMPLE_SNAPSHOT_CONTROLLER.lease,
};

/**
 * Labels the sample's snapshot-controller for the driver, so that csi-handover manages it and a log-level change
 * rolls it as it rolls the controller Deployment (the sample leaves it unlabelled; a kubectl apply keeps the label).
 */
export function manageSnapshotController(): Promise<string> {
  return kubectl('-n', SAMPLE_NAMESPACE, 'label', '--overwrite', `deployment/${SAMPLE_SNAPSHOT_CONTROLLER.deployment}`, `${DRIVER_LABEL}=${SAMPLE_DRIVER}`);
}

/** The sample driver's overlays: lease timings, the sidecars' own release-on-exit gate, replicas. */
export type SampleOverlay = `${'upstream' | 'openshift'}${'' | '-release-on-exit'}${'' | '-1replica'}`;

/**
 * Installs the snapshot CRDs, then the given overlay of the sample driver and its snapshot class. With `verbosity`,
 * the overlay's `--v=2` becomes `--v=<verbosity>`: applied at the level the operator keeps the driver at, it rolls
 * only what the overlay changes, instead of rolling at `--v=2` and again when the operator writes the level back
 * (which deletes pods just started: a CI run's node record shows a snapshot-controller that got its SIGTERM 11 ms
 * after its start ignore it, as the container's PID 1 before its handler was installed, and run on, a candidate
 * for its lease, until the SIGKILL 30 s later). With `restart`, the Deployments roll in the same write, as
 * `kubectl rollout restart` would.
 */
export async function deploySample(overlay: SampleOverlay, verbosity?: number, restart = false): Promise<void> {
  await kubectl('apply', '-k', join(samplesDir, 'crds'));
  await kubectl(
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    'crd/volumesnapshotclasses.snapshot.storage.k8s.io',
    'crd/volumesnapshotcontents.snapshot.storage.k8s.io',
    'crd/volumesnapshots.snapshot.storage.k8s.io',
  );
  if (verbosity === undefined && !restart) await kubectl('apply', '-k', join(samplesDir, overlay));
  else
    await applyKustomization(join(samplesDir, overlay), (o) => {
      const template = o.spec?.template;
      if (verbosity !== undefined)
        for (const c of template?.spec?.containers ?? []) c.args = c.args?.map((a) => (/^--v=\d+$/.test(a) ? `--v=${verbosity}` : a));
      if (restart && template && o.kind === 'Deployment')
        template.metadata = {
          ...template.metadata,
          annotations: { ...template.metadata?.annotations, 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() },
        };
    });
  await kubectl('apply', '-k', join(samplesDir, 'snapshotclass'));
}

/** A watch running in the background that records every event with its arrival time; resolves once it is open. */
export async function recordWatch<T>(http: KubeHttp, path: string, query: Query): Promise<{ seen: { t: number; type: string; obj: T }[]; stop: () => void }> {
  const seen: { t: number; type: string; obj: T }[] = [];
  const abort = new AbortController();
  await new Promise<void>((opened, failed) => {
    http
      .watch(path, query, (type, obj) => void seen.push({ t: Date.now(), type, obj: obj as T }), { signal: abort.signal, onOpen: opened })
      .catch((err: unknown) => {
        if (!abort.signal.aborted) failed(err instanceof Error ? err : new Error(String(err)));
      });
  });
  return { seen, stop: () => abort.abort() };
}
