// The Helm chart (charts/csi-handover): helm lint passes; with default values it renders exactly the objects of
// config/default (kustomize) but the Namespace, which Helm leaves to `--create-namespace` or the admin; its
// values reach the Deployment; bad values fail with a clear message.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { binDir, repoRoot } from '../../hack/lib/cluster.js';

const run = promisify(execFile);
const chart = join(repoRoot, 'charts', 'csi-handover');
const HELM_LABELS = ['app.kubernetes.io/instance', 'app.kubernetes.io/managed-by', 'app.kubernetes.io/version', 'helm.sh/chart'];

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: unknown;
}

const docs = (text: string): K8sObject[] =>
  parseAllDocuments(text)
    .map((d) => d.toJS() as K8sObject | null)
    .filter((o): o is K8sObject => o !== null);
const key = (o: K8sObject) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

async function helm(...args: string[]): Promise<string> {
  return (await run(join(binDir, 'helm'), args, { maxBuffer: 16 * 1024 * 1024 })).stdout;
}
/** The objects `kubectl kustomize` renders of a directory under config/. */
const kustomize = async (dir: string): Promise<K8sObject[]> => docs((await run(join(binDir, 'kubectl'), ['kustomize', join(repoRoot, 'config', dir)])).stdout);
/** The object without the labels Helm adds to everything (no labels left: none). */
const withoutHelmLabels = (o: K8sObject): K8sObject => {
  const labels = Object.fromEntries(Object.entries(o.metadata.labels ?? {}).filter(([k]) => !HELM_LABELS.includes(k)));
  return { ...o, metadata: { ...o.metadata, labels: Object.keys(labels).length ? labels : undefined } };
};
const render = async (...set: string[]) =>
  docs(await helm('template', 'csi-handover', chart, '--namespace', 'csi-handover', '--include-crds', ...set.flatMap((s) => ['--set', s])));
const deploymentEnv = (objs: K8sObject[]): Record<string, string> => {
  const d = objs.find((o) => o.kind === 'Deployment') as unknown as {
    spec: { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } };
  };
  return Object.fromEntries((d.spec.template.spec.containers[0]?.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value ?? '']));
};

describe('charts/csi-handover', () => {
  it('passes helm lint --strict', async () => {
    expect(await helm('lint', '--strict', chart)).toContain('1 chart(s) linted, 0 chart(s) failed');
  });

  it('renders with its defaults the objects of config/default (but the Namespace), Helm labels aside', async () => {
    const fromHelm = new Map((await render()).map((o) => [key(o), withoutHelmLabels(o)]));
    const fromKustomize = new Map((await kustomize('default')).map((o) => [key(o), o]));
    expect([...fromKustomize.keys()].filter((k) => !fromHelm.has(k))).toEqual(['Namespace//csi-handover']);
    expect([...fromHelm.keys()].filter((k) => !fromKustomize.has(k))).toEqual([]);
    for (const [k, o] of fromHelm) expect(JSON.parse(JSON.stringify(o)), k).toEqual(fromKustomize.get(k));
  });

  it('carries its values into the Deployment and the webhook', async () => {
    const objs = await render(
      'mode=companion',
      'replicas=3',
      'gateTimeout=20s',
      'logLevel=debug',
      'webhook.certSource=service-ca',
      'earlyStart=true',
      'watchNamespaces={a,b}',
      'image.tag=v9',
      'driverNamespaces={csi-a,csi-b}',
    );
    const env = deploymentEnv(objs);
    expect(env).toMatchObject({
      CSI_HANDOVER_MODE: 'companion',
      GATE_TIMEOUT: '20s',
      LOG_LEVEL: 'debug',
      WEBHOOK_CERT_SOURCE: 'service-ca',
      EARLY_START: 'true',
      WATCH_NAMESPACES: 'a,b',
    });
    const d = objs.find((o) => o.kind === 'Deployment') as unknown as { spec: { replicas: number; template: { spec: { containers: { image: string }[] } } } };
    expect(d.spec.replicas).toBe(3);
    expect(d.spec.template.spec.containers[0]?.image).toBe('csi-handover.local/csi-handover:v9');
    // Write access in the drivers' namespaces, and nowhere else.
    const bindings = objs.filter((o) => o.kind === 'RoleBinding' && (o as unknown as { roleRef: { name: string } }).roleRef.name === 'csi-handover-driver');
    expect(bindings.map((b) => b.metadata.namespace)).toEqual(['csi-a', 'csi-b']);
    const webhook = objs.find((o) => o.kind === 'MutatingWebhookConfiguration');
    expect(webhook?.metadata).toMatchObject({ annotations: { 'service.beta.openshift.io/inject-cabundle': 'true' } });
  });

  it('renders the ServiceMonitor and the PrometheusRule of config/prometheus when asked', async () => {
    const objs = await render('monitoring.serviceMonitor=true', 'monitoring.prometheusRule=true');
    const rule = objs.find((o) => o.kind === 'PrometheusRule');
    const shipped = (await kustomize('prometheus')).find((o) => o.kind === 'PrometheusRule');
    expect(rule?.spec).toEqual(shipped?.spec);
    expect(objs.some((o) => o.kind === 'ServiceMonitor')).toBe(true);
    expect((await render()).some((o) => o.kind === 'PrometheusRule' || o.kind === 'ServiceMonitor')).toBe(false);
  });

  it('renders the node witness of config/witness when asked, with the chart image and resources, and nothing of it by default', async () => {
    const isWitness = (o: K8sObject) => o.metadata.labels?.['app.kubernetes.io/component'] === 'witness';
    const objs = await render('witness.enabled=true', 'image.tag=v9', 'witness.resources.requests.cpu=7m');
    const fromHelm = new Map(objs.filter(isWitness).map((o) => [key(o), withoutHelmLabels(o)]));
    const fromKustomize = new Map((await kustomize('witness')).map((o) => [key(o), o]));
    expect([...fromHelm.keys()].sort()).toEqual([...fromKustomize.keys()].sort());
    for (const [k, o] of fromHelm) {
      // What the values change: the image and the resources of its one container; the rest as config/witness has it.
      if (o.kind === 'DaemonSet') {
        const c = (o as unknown as { spec: { template: { spec: { containers: Record<string, unknown>[] } } } }).spec.template.spec.containers[0] ?? {};
        expect(c.image).toBe('csi-handover.local/csi-handover:v9');
        expect(c.resources).toEqual({ requests: { cpu: '7m' } });
        const shipped = (fromKustomize.get(k) as unknown as { spec: { template: { spec: { containers: Record<string, unknown>[] } } } }).spec.template.spec
          .containers[0];
        Object.assign(c, { image: shipped?.image, resources: shipped?.resources });
      }
      expect(JSON.parse(JSON.stringify(o)), k).toEqual(fromKustomize.get(k));
      expect(objs.find((x) => key(x) === k)?.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('Helm');
    }
    expect((await render()).some(isWitness)).toBe(false);
  });

  it.each([
    ['mode=both', 'mode must be standalone or companion, not "both"'],
    ['webhook.certSource=vault', 'webhook.certSource must be self or service-ca, not "vault"'],
    ['replicas=0', 'replicas must be at least 1'],
  ])('refuses %s', async (set, message) => {
    await expect(render(set)).rejects.toThrow(message);
  });
});
