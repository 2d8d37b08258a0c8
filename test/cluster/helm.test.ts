// The Helm chart on the local cluster: installed in place of config/default (same objects, so the kustomize
// install is taken away first), it runs under the namespace's restricted Pod Security and hands a lease over;
// `helm upgrade` rolls the operator and the CR's handover report survives it; `helm uninstall` takes it away.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { V1Deployment, V1Namespace } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binDir, clusterHttp, kubeconfigPath, kubectl, repoRoot, SAMPLE_LEASES, waitFor } from '../../hack/lib/cluster.js';
import {
  handOverByLevel,
  installOperator,
  LEVELS,
  OPERATOR_NAMESPACE,
  operatorLeader,
  operatorPods,
  removeKustomizeInstall,
  sampleReport,
  standaloneSampleAt,
  waitOperatorPodsGone,
} from '../../hack/lib/operator.js';
import { deploymentPath, waitRolloutComplete } from '../../hack/lib/rollout.js';

const run = promisify(execFile);
const http = clusterHttp();
const leases: string[] = Object.values(SAMPLE_LEASES);
const chart = join(repoRoot, 'charts', 'csi-handover');

async function helm(...args: string[]): Promise<string> {
  try {
    return (await run(join(binDir, 'helm'), args, { env: { ...process.env, KUBECONFIG: kubeconfigPath }, maxBuffer: 16 * 1024 * 1024 })).stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`helm ${args.join(' ')}: ${e.stderr?.trim() || e.message}`, { cause: err });
  }
}

beforeAll(async () => {
  await standaloneSampleAt(http, LEVELS[4] ?? 'Debug');
  await removeKustomizeInstall(http);
});

afterAll(async () => {
  await helm('uninstall', 'csi-handover', '--namespace', OPERATOR_NAMESPACE, '--wait', '--ignore-not-found').catch(() => undefined);
  // Later test files expect the kustomize install.
  await installOperator(http);
});

describe('helm install, upgrade and uninstall', () => {
  it('installs under the restricted Pod Security Standard and hands a lease over', async () => {
    const ns = await http.get<V1Namespace>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}`);
    expect(ns.metadata?.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    await helm('install', 'csi-handover', chart, '--namespace', OPERATOR_NAMESPACE, '--set', 'gateTimeout=30s', '--wait', '--timeout', '3m');
    const pods = await operatorPods(http);
    expect(pods).toHaveLength(2);
    expect(pods.every((p) => p.metadata?.labels?.['app.kubernetes.io/name'] === 'csi-handover')).toBe(true);
    const d = await http.get<V1Deployment>(deploymentPath(OPERATOR_NAMESPACE, 'csi-handover'));
    expect(d.metadata?.labels?.['app.kubernetes.io/managed-by']).toBe('Helm');
    expect(d.spec?.template.spec?.containers[0]?.env?.find((e) => e.name === 'GATE_TIMEOUT')?.value).toBe('30s');

    // A fresh install leads once a replica holds the operator Lease (the old install's may still hold it).
    await waitFor('a new replica to lead', 60_000, async () => (await operatorLeader(http)).metadata?.name !== undefined, 500);
    const { report: r } = await handOverByLevel(http, LEVELS[2] ?? 'Normal');
    expect(r.leases.filter((h) => leases.includes(h.lease)).map((h) => h.releasedBy)).toEqual(leases.map(() => 'operator'));
  });

  it('helm upgrade rolls the operator; the handover report survives and the next rollout adds to it', async () => {
    const before = await sampleReport(http);
    expect(before).toBeDefined();
    const oldPods = new Set((await operatorPods(http)).map((p) => p.metadata?.name));
    await helm('upgrade', 'csi-handover', chart, '--namespace', OPERATOR_NAMESPACE, '--reuse-values', '--set', 'logLevel=debug', '--wait', '--timeout', '3m');
    await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
    await waitFor('the old operator pods gone', 120_000, async () => (await operatorPods(http)).every((p) => !oldPods.has(p.metadata?.name)), 500);
    // The new replicas read the report back from the CR: unchanged by the upgrade.
    expect(await sampleReport(http)).toEqual(before);

    const { report: after } = await handOverByLevel(http, LEVELS[4] ?? 'Debug');
    expect(after.totals.handovers).toBeGreaterThan(before?.totals.handovers ?? 0);
    expect(after.leases.filter((h) => leases.includes(h.lease)).map((h) => h.releasedBy)).toEqual(leases.map(() => 'operator'));
  });

  it('helm uninstall takes the operator away', async () => {
    await helm('uninstall', 'csi-handover', '--namespace', OPERATOR_NAMESPACE, '--wait');
    await waitOperatorPodsGone(http);
    await expect(http.get(deploymentPath(OPERATOR_NAMESPACE, 'csi-handover'))).rejects.toThrow();
    expect(await kubectl('get', 'mutatingwebhookconfiguration', '--ignore-not-found', '-o', 'name')).not.toContain('csi-handover');
  });
});
