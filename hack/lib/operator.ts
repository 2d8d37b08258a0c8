// Installing the operator on the local cluster from config/ (as pods under its own service account and
// RBAC), switching its mode, and finding its leader — shared by the cluster tests, the demo and benchmarks.
import { join } from 'node:path';
import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import type { KubeHttp } from '../../src/kube/http.js';
import { kubectl, repoRoot } from './cluster.js';
import { waitRolloutComplete } from './rollout.js';

export const OPERATOR_NAMESPACE = 'csi-handover';

export async function installOperator(http: KubeHttp): Promise<void> {
  await kubectl('apply', '-k', join(repoRoot, 'config', 'default'));
  await kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/clustercsidrivers.operator.openshift.io');
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
}

/** Switches standalone/companion (a rollout of the operator itself) and waits for it; no-op when already there. */
export async function setOperatorMode(http: KubeHttp, mode: 'standalone' | 'companion'): Promise<void> {
  await kubectl('-n', OPERATOR_NAMESPACE, 'set', 'env', 'deployment/csi-handover', `CSI_HANDOVER_MODE=${mode}`);
  await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
}

export async function operatorPods(http: KubeHttp): Promise<V1Pod[]> {
  return (await http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${OPERATOR_NAMESPACE}/pods`, { labelSelector: 'app.kubernetes.io/name=csi-handover' })).items;
}

export async function operatorLeader(http: KubeHttp): Promise<V1Pod> {
  const lease = await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${OPERATOR_NAMESPACE}/leases/csi-handover-leader`);
  const leader = (await operatorPods(http)).find((p) => p.metadata?.name === lease.spec?.holderIdentity);
  if (!leader) throw new Error(`operator leader ${lease.spec?.holderIdentity} is not a running operator pod`);
  return leader;
}
