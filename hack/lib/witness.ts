// Speaking as the node witness does, for the tests that check who may: its pod-bound tokens, and its report sent
// to an operator replica over TLS checked against the webhook's caBundle.
import { request as httpsRequest } from 'node:https';
import type { V1Pod } from '@kubernetes/client-node';
import { fixedToken } from '../../src/kube/config.js';
import { KubeHttp } from '../../src/kube/http.js';
import { kubeconfigAccess } from '../../src/kube/kubeconfig.js';
import { WITNESS_REPORT_PATH } from '../../src/handover/witness-report.js';
import { kubeconfigPath, kubectl } from './cluster.js';
import { operatorLeader, WITNESS_NAMESPACE } from './operator.js';

export async function witnessPods(http: KubeHttp): Promise<V1Pod[]> {
  const list = await http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${WITNESS_NAMESPACE}/pods`, { labelSelector: 'app.kubernetes.io/component=witness' });
  return list.items;
}

/** A token of ServiceAccount `sa` in `namespace`, bound to pod `pod` (so the API server knows its node), for `audience`. */
export async function podBoundToken(namespace: string, sa: string, pod: string, audience?: string): Promise<string> {
  const args = ['-n', namespace, 'create', 'token', sa, '--bound-object-kind=Pod', `--bound-object-name=${pod}`];
  return (await kubectl(...args, ...(audience ? [`--audience=${audience}`] : []))).trim();
}

/** The witness pod on `node`'s own token: for the API server, or for `audience`. */
export async function witnessToken(http: KubeHttp, node: string, audience?: string): Promise<string> {
  const p = (await witnessPods(http)).find((x) => x.spec?.nodeName === node);
  if (!p?.metadata?.name) throw new Error(`no witness pod on ${node}`);
  return podBoundToken(WITNESS_NAMESPACE, 'csi-handover-witness', p.metadata.name, audience);
}

/** A client of the local API server that authenticates with `token` only. */
export function clientWithToken(token: string): KubeHttp {
  return new KubeHttp({ ...kubeconfigAccess(kubeconfigPath), cert: undefined, key: undefined, token: fixedToken(token) });
}

/** Sends a report to the operator leader as the witness does; resolves with "<status>: <body>". */
export async function sendWitnessReport(http: KubeHttp, token: string | undefined, body: unknown): Promise<string> {
  const leader = await operatorLeader(http);
  const mwc = await http.get<{ webhooks: { clientConfig: { caBundle: string } }[] }>(
    '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/csi-handover',
  );
  const ca = Buffer.from(mwc.webhooks[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8');
  return new Promise<string>((resolve, reject) => {
    const req = httpsRequest(
      {
        host: leader.status?.podIP,
        port: 9443,
        servername: 'csi-handover-webhook.csi-handover.svc',
        ca,
        method: 'POST',
        path: WITNESS_REPORT_PATH,
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve(`${res.statusCode}: ${text}`));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
