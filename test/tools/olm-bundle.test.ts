// The OLM bundle (bundle/) says what config/ says: the CSV's Deployment is config/default's but for the webhook
// certificate settings OLM provides, its permissions are the roles' (less the webhook configuration OLM owns), its
// webhook definition is config/webhook's, and it ships the CRDs of crds/ and config/report unchanged.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { binDir, repoRoot } from '../../hack/lib/cluster.js';

// Manifests are read loosely here: the assertions compare whole values.
type Obj = { kind: string; metadata: { name: string; namespace?: string; annotations?: Record<string, string> }; [k: string]: any };
const bundle = join(repoRoot, 'bundle');
const csv = parse(readFileSync(join(bundle, 'manifests', 'csi-handover.clusterserviceversion.yaml'), 'utf8')) as Obj;
const kustomize = async (): Promise<Obj[]> =>
  parseAllDocuments((await promisify(execFile)(join(binDir, 'kubectl'), ['kustomize', join(repoRoot, 'config', 'default')])).stdout).map(
    (d) => d.toJS() as Obj,
  );
const find = (objs: Obj[], kind: string, name: string): Obj => {
  const o = objs.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`config/default has no ${kind} ${name}`);
  return o;
};
const OLM_ENV = [
  { name: 'WEBHOOK_CERT_SOURCE', value: 'olm' },
  { name: 'WEBHOOK_SECRET', value: 'csi-handover-service-cert' },
  { name: 'WEBHOOK_SERVICE', value: 'csi-handover-service' },
];

describe('bundle/', () => {
  it("runs config/default's Deployment, with the webhook certificate OLM issues", async () => {
    const want = structuredClone(find(await kustomize(), 'Deployment', 'csi-handover').spec);
    const c = want.template.spec.containers[0];
    c.env = [...c.env.filter((e: { name: string }) => e.name !== 'WEBHOOK_CERT_SOURCE'), ...OLM_ENV];
    const [deployment] = csv.spec.install.spec.deployments;
    expect(csv.spec.install.spec.deployments).toHaveLength(1);
    expect(deployment.name).toBe('csi-handover');
    expect(deployment.spec).toEqual(want);
  });

  it("grants what config/rbac grants, less the webhook configuration (OLM owns it) and the Secret's creation", async () => {
    const objs = await kustomize();
    const clusterRules = find(objs, 'ClusterRole', 'csi-handover').rules.filter(
      (r: { resources: string[] }) => !r.resources.includes('mutatingwebhookconfigurations'),
    );
    // OLM makes Roles only in the operator's namespace: the Events Role of "default" becomes cluster-wide here.
    const events = find(objs, 'Role', 'csi-handover-events').rules;
    expect(csv.spec.install.spec.clusterPermissions).toEqual([{ serviceAccountName: 'csi-handover', rules: [...clusterRules, ...events] }]);
    // The writes in drivers' namespaces: the same ClusterRole, for the admin to bind per namespace.
    const driver = parse(readFileSync(join(bundle, 'manifests', 'csi-handover-driver_rbac.authorization.k8s.io_v1_clusterrole.yaml'), 'utf8')) as Obj;
    expect(driver).toEqual(find(objs, 'ClusterRole', 'csi-handover-driver'));
    expect(csv.spec.install.spec.permissions).toEqual([
      {
        serviceAccountName: 'csi-handover',
        rules: [
          ...find(objs, 'Role', 'csi-handover-leader-election').rules,
          { apiGroups: [''], resources: ['secrets'], resourceNames: ['csi-handover-service-cert'], verbs: ['list', 'watch'] },
        ],
      },
    ]);
  });

  it("defines config/webhook's admission webhook for OLM to create", async () => {
    const [w] = find(await kustomize(), 'MutatingWebhookConfiguration', 'csi-handover').webhooks;
    expect(csv.spec.webhookdefinitions).toEqual([
      {
        type: 'MutatingAdmissionWebhook',
        generateName: w.name,
        deploymentName: 'csi-handover',
        containerPort: 443,
        targetPort: 9443,
        webhookPath: w.clientConfig.service.path,
        admissionReviewVersions: w.admissionReviewVersions,
        rules: w.rules,
        failurePolicy: w.failurePolicy,
        sideEffects: w.sideEffects,
        timeoutSeconds: w.timeoutSeconds,
        matchPolicy: w.matchPolicy,
        reinvocationPolicy: w.reinvocationPolicy,
      },
    ]);
  });

  it('ships the CRDs of crds/ and config/report unchanged, as owned, with the metrics Service of config/', async () => {
    for (const [dir, name] of [
      ['crds', 'operator.openshift.io_clustercsidrivers.yaml'],
      [join('config', 'report'), 'csi-handover.io_csihandoverreports.yaml'],
    ] as const) {
      expect(readFileSync(join(bundle, 'manifests', name), 'utf8')).toBe(readFileSync(join(repoRoot, dir, name), 'utf8'));
    }
    expect(csv.spec.customresourcedefinitions.owned.map((c: { name: string; version: string; kind: string }) => `${c.name} ${c.version} ${c.kind}`)).toEqual([
      'clustercsidrivers.operator.openshift.io v1 ClusterCSIDriver',
      'csihandoverreports.csi-handover.io v1alpha1 CSIHandoverReport',
    ]);
    const svc = parse(readFileSync(join(bundle, 'manifests', 'csi-handover-metrics_v1_service.yaml'), 'utf8')) as Obj;
    const { namespace: _, ...metadata } = find(await kustomize(), 'Service', 'csi-handover-metrics').metadata;
    expect(svc).toEqual({ ...find(await kustomize(), 'Service', 'csi-handover-metrics'), metadata });
  });

  it('names its package and channel, and supports AllNamespaces only (it watches cluster-scoped drivers)', () => {
    const a = (parse(readFileSync(join(bundle, 'metadata', 'annotations.yaml'), 'utf8')) as { annotations: Record<string, string> }).annotations;
    expect(a).toMatchObject({
      'operators.operatorframework.io.bundle.mediatype.v1': 'registry+v1',
      'operators.operatorframework.io.bundle.manifests.v1': 'manifests/',
      'operators.operatorframework.io.bundle.package.v1': 'csi-handover',
      'operators.operatorframework.io.bundle.channel.default.v1': a['operators.operatorframework.io.bundle.channels.v1'],
    });
    expect(csv.spec.installModes.filter((m: { supported: boolean }) => m.supported).map((m: { type: string }) => m.type)).toEqual(['AllNamespaces']);
    expect(csv.metadata.name).toBe(`csi-handover.v${csv.spec.version}`);
    expect(JSON.parse(csv.metadata.annotations?.['alm-examples'] ?? '[]')[0]?.kind).toBe('ClusterCSIDriver');
  });
});
