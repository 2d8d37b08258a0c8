// Helpers shared by the cluster tests, the demo and the benchmarks: paths of the local cluster, a client
// for it, kubectl, the node agent's control API, and condition waits.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeHttp } from '../../src/kube/http.js';
import type { AgentEvent } from '../node-agent/pod-worker.js';

const run = promisify(execFile);

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const localDir = process.env.CSI_HANDOVER_LOCAL ?? join(repoRoot, '.local');
export const kubeconfigPath = join(localDir, 'kubeconfig');
export const binDir = join(process.env.CSI_HANDOVER_CACHE ?? join(homedir(), '.cache', 'csi-handover'), 'bin');
export const nodeAgentUrl = `http://127.0.0.1:${process.env.NODE_AGENT_PORT ?? '20280'}`;

export function clusterHttp(): KubeHttp {
  if (!existsSync(kubeconfigPath)) throw new Error(`no kubeconfig at ${kubeconfigPath}: run make cluster-up`);
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return new KubeHttp(kc);
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
    throw new Error(`kubectl ${args.join(' ')}: ${e.stderr?.trim() || e.message}`);
  }
}

export async function clusterScript(...args: string[]): Promise<string> {
  const { stdout } = await run(join(repoRoot, 'hack', 'cluster.sh'), args, { env: process.env, maxBuffer: 16 * 1024 * 1024 });
  return stdout;
}

/** Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined | false> | T | undefined | false, intervalMs = 100): Promise<T> {
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
      throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}${lastError ? ` (last error: ${String(lastError)})` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export type { AgentEvent };

export async function nodeAgentEvents(): Promise<AgentEvent[]> {
  const res = await fetch(`${nodeAgentUrl}/events`);
  return (await res.json()) as AgentEvent[];
}

export async function setPartitioned(node: string, partitioned: boolean): Promise<void> {
  const res = await fetch(`${nodeAgentUrl}/partition?node=${node}&value=${partitioned}`, { method: 'POST' });
  if (!res.ok) throw new Error(`partition ${node}: ${res.status} ${await res.text()}`);
}

export const samplesDir = join(repoRoot, 'config', 'samples', 'hostpath');
export const SAMPLE_NAMESPACE = 'csi-hostpath';
export const SAMPLE_DEPLOYMENT = 'csi-hostpath-controller';
export const SAMPLE_DRIVER = 'hostpath.csi.k8s.io';

/** The four controller sidecar leases of the sample driver (facts §1, dots sanitised to dashes). */
export const SAMPLE_LEASES = {
  'csi-provisioner': 'hostpath-csi-k8s-io',
  'csi-attacher': 'external-attacher-leader-hostpath-csi-k8s-io',
  'csi-resizer': 'external-resizer-hostpath-csi-k8s-io',
  'csi-snapshotter': 'external-snapshotter-leader-hostpath-csi-k8s-io',
} as const;

/** The sample driver's overlays: lease timings, the sidecars' own release-on-exit gate, replicas. */
export type SampleOverlay = `${'upstream' | 'openshift'}${'' | '-release-on-exit'}${'' | '-1replica'}`;

/** Installs the snapshot CRDs, then the given overlay of the sample driver and its snapshot class. */
export async function deploySample(overlay: SampleOverlay): Promise<void> {
  await kubectl('apply', '-k', join(samplesDir, 'crds'));
  await kubectl('wait', '--for=condition=Established', '--timeout=60s',
    'crd/volumesnapshotclasses.snapshot.storage.k8s.io', 'crd/volumesnapshotcontents.snapshot.storage.k8s.io', 'crd/volumesnapshots.snapshot.storage.k8s.io');
  await kubectl('apply', '-k', join(samplesDir, overlay));
  await kubectl('apply', '-k', join(samplesDir, 'snapshotclass'));
}
