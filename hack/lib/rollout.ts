// Rollout helpers for tests, demo and benchmarks: trigger a rollout the way `kubectl rollout restart`
// does, and wait until a Deployment has fully rolled out and every old pod is gone.
import type { V1DaemonSet, V1Deployment, V1Lease, V1Pod, V1PodList } from '@kubernetes/client-node';
import { DRIVER_LABEL } from '../../src/api/names.js';
import { type KubeHttp, PatchType } from '../../src/kube/http.js';
import { waitFor } from './cluster.js';
import { isConflict } from '../../src/kube/errors.js';

export const deploymentPath = (ns: string, name: string) => `/apis/apps/v1/namespaces/${ns}/deployments/${name}`;

export async function rolloutRestart(http: KubeHttp, ns: string, name: string): Promise<Date> {
  const at = new Date();
  await http.patch(
    deploymentPath(ns, name),
    {
      spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': at.toISOString() } } } },
    },
    PatchType.strategic,
  );
  return at;
}

export async function podsOf(http: KubeHttp, ns: string, d: V1Deployment): Promise<V1Pod[]> {
  const selector = Object.entries(d.spec?.selector.matchLabels ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const list = await http.get<V1PodList>(`/api/v1/namespaces/${ns}/pods`, { labelSelector: selector });
  return list.items;
}

/** Complete: the controller saw the latest spec, every replica is updated and available, no other pod is left. */
export async function rolloutComplete(http: KubeHttp, ns: string, name: string): Promise<V1Pod[] | undefined> {
  const d = await http.get<V1Deployment>(deploymentPath(ns, name));
  const want = d.spec?.replicas ?? 1;
  const s = d.status;
  if (!s || (s.observedGeneration ?? 0) < (d.metadata?.generation ?? 0)) return undefined;
  if (s.updatedReplicas !== want || s.availableReplicas !== want || s.replicas !== want) return undefined;
  const pods = await podsOf(http, ns, d);
  if (pods.length !== want || pods.some((p) => p.metadata?.deletionTimestamp || p.status?.phase !== 'Running')) return undefined;
  return pods;
}

export function waitRolloutComplete(http: KubeHttp, ns: string, name: string, timeoutMs: number): Promise<V1Pod[]> {
  return waitFor(`rollout of ${ns}/${name}`, timeoutMs, () => rolloutComplete(http, ns, name), 250);
}

/** Resolves once every named lease is held by one of the given pods. */
export function waitLeasesHeldBy(
  http: KubeHttp,
  ns: string,
  leases: readonly string[],
  pods: readonly V1Pod[],
  timeoutMs: number,
): Promise<Map<string, string>> {
  const names = new Set(pods.map((p) => p.metadata?.name ?? ''));
  return waitFor(
    `leases ${leases.join(', ')} held by ${[...names].join(', ')}`,
    timeoutMs,
    async () => {
      const holders = new Map<string, string>();
      for (const lease of leases) {
        try {
          const l = await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lease}`);
          const h = l.spec?.holderIdentity ?? '';
          if (!names.has(h)) return undefined;
          holders.set(lease, h);
        } catch {
          return undefined;
        }
      }
      return holders;
    },
    250,
  );
}

/** The --v=N of the Deployment's first container that has one (the driver's own level). */
export function templateVerbosity(d: V1Deployment): number | undefined {
  for (const c of d.spec?.template.spec?.containers ?? []) {
    const flag = (c.args ?? []).find((a) => /^--v=\d+$/.test(a));
    if (flag) return Number(flag.slice('--v='.length));
  }
  return undefined;
}

/**
 * csi-operator's way of applying a log level: rewrite --v=N in every container of each Deployment and DaemonSet
 * of the driver (labelled csi-handover.io/driver=<driver>, in name order), one after another: the same workloads
 * roll, in the same order, as when csi-handover applies the ClusterCSIDriver's level in standalone mode.
 */
export async function setVerbosityDirectly(http: KubeHttp, ns: string, driver: string, v: number): Promise<void> {
  const labelSelector = `${DRIVER_LABEL}=${driver}`;
  const lists = await Promise.all(
    (['deployments', 'daemonsets'] as const).map(async (kind) =>
      (await http.get<{ items: (V1Deployment | V1DaemonSet)[] }>(`/apis/apps/v1/namespaces/${ns}/${kind}`, { labelSelector })).items.map((w) => ({
        path: `/apis/apps/v1/namespaces/${ns}/${kind}/${w.metadata?.name}`,
        name: w.metadata?.name ?? '',
        w,
      })),
    ),
  );
  for (const { path, w } of lists.flat().sort((a, b) => a.name.localeCompare(b.name))) {
    // Its controller writes the status meanwhile: a conflict is answered by reading it again.
    for (let attempt = 1, current = w; ; attempt++) {
      for (const c of current.spec?.template.spec?.containers ?? []) c.args = (c.args ?? []).map((a) => (/^--v=\d+$/.test(a) ? `--v=${v}` : a));
      try {
        await http.request('PUT', path, { body: current });
        break;
      } catch (err) {
        if (!isConflict(err) || attempt >= 5) throw err;
        current = await http.get<V1Deployment | V1DaemonSet>(path);
      }
    }
  }
}
