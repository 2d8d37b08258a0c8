// A small managed controller for webhook tests (test/cluster/webhook.test.ts, cert-rotation.test.ts): a Deployment
// labelled as a CSI driver's, of one shell pod that takes $DIE_AFTER seconds to die after SIGTERM, and what the
// API server counts of the pod admission webhook's answers.
import type { V1Deployment, V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import { DRIVER_LABEL } from '../../src/api/names.js';
import type { KubeHttp } from '../../src/kube/http.js';
import { waitFor } from './cluster.js';

const WEBHOOK = 'pods.csi-handover.io';

export function shellController(namespace: string, name: string, dieAfterSeconds: number): V1Deployment {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace, labels: { [DRIVER_LABEL]: 'webhook-test.example.com' } },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          terminationGracePeriodSeconds: 60,
          containers: [
            {
              name: 'leader',
              image: 'csi-handover.local/shell:v1',
              env: [{ name: 'DIE_AFTER', value: String(dieAfterSeconds) }],
              // Dies $DIE_AFTER seconds after SIGTERM: a holder that is terminating, and not yet dead, for that long.
              command: ['sh', '-c', 'trap "sleep $DIE_AFTER; exit 0" TERM; while true; do sleep 1; done'],
            },
          ],
        },
      },
    },
  };
}

async function apiserverMetric(http: KubeHttp, series: string): Promise<number> {
  const text = await http.get<string>('/metrics');
  return text
    .split('\n')
    .filter((l) => l.startsWith(series))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}
/** Admissions the API server let through because the webhook did not answer. */
export const webhookFailedOpen = (http: KubeHttp) => apiserverMetric(http, `apiserver_admission_webhook_fail_open_count{name="${WEBHOOK}"`);
/** Admissions the webhook answered. */
export const webhookAnswered = (http: KubeHttp) => apiserverMetric(http, `apiserver_admission_webhook_request_total{code="200",name="${WEBHOOK}"`);

/** The operator has narrowed the webhook to the namespace (it follows the managed Deployments). */
export async function webhookCovers(http: KubeHttp, namespace: string): Promise<void> {
  await waitFor(`the webhook asks about ${namespace}`, 30_000, async () => {
    const mwc = await http.get<V1MutatingWebhookConfiguration>('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/csi-handover');
    return mwc.webhooks?.every((w) => w.namespaceSelector?.matchExpressions?.some((e) => e.operator === 'In' && e.values?.includes(namespace)));
  });
}
