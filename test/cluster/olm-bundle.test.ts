// The OLM bundle on the local cluster. OLM itself does not run here (operator-sdk and opm are not served): its
// own CRDs are installed (../shared/third_party/olm-crds-v0.45.0) and the bundle is server-side applied against
// them with strict validation; then the operator is installed the way OLM's deployment strategy would install it
// — the CSV's ServiceAccount, permissions, Deployment and the bundle's ClusterRole for drivers' namespaces (the
// sample driver's namespace binds it) — and hands a lease over. OLM would also issue the
// webhook's serving certificate into the Secret csi-handover-service-cert (the replicas are Ready only once they
// can serve the webhook): the test writes one there, as OLM would; the webhook configuration OLM would create is
// not made, so new pods are not gated and the handover is the operator's release alone.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { V1Deployment } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { clusterHttp, kubectl, repoRoot, SAMPLE_DEPLOYMENT, SAMPLE_LEASES, SAMPLE_NAMESPACE as NS, waitFor } from '../../hack/lib/cluster.js';
import {
  handOverByLevel,
  installOperator,
  LEVELS,
  OPERATOR_NAMESPACE,
  operatorLeader,
  operatorPods,
  removeKustomizeInstall,
  standaloneSampleAt,
  waitOperatorPodsGone,
} from '../../hack/lib/operator.js';
import { deploymentPath, templateVerbosity, waitRolloutComplete } from '../../hack/lib/rollout.js';
import { thirdPartyDir } from '../../hack/lib/third-party.js';

const http = clusterHttp();
const leases: string[] = Object.values(SAMPLE_LEASES);
const bundle = join(repoRoot, 'bundle', 'manifests');
const dir = mkdtempSync(join(tmpdir(), 'csi-handover-olm-'));
const FIELD_MANAGER = 'csi-handover-bundle-test';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}
interface Csv {
  spec: {
    install: {
      spec: {
        clusterPermissions: { serviceAccountName: string; rules: Rule[] }[];
        permissions: { serviceAccountName: string; rules: Rule[] }[];
        deployments: { name: string; spec: V1Deployment['spec'] }[];
      };
    };
  };
}

const csv = parse(readFileSync(join(bundle, 'csi-handover.clusterserviceversion.yaml'), 'utf8')) as Csv;

/** What OLM's deployment install strategy creates from a CSV (owner references and OLM's labels aside). */
function installedByOlm(): object[] {
  const s = csv.spec.install.spec;
  const ns = OPERATOR_NAMESPACE;
  const meta = (name: string, namespaced = true) => ({ name, ...(namespaced ? { namespace: ns } : {}), labels: { 'app.kubernetes.io/name': 'csi-handover' } });
  const accounts = new Set([...s.clusterPermissions, ...s.permissions].map((p) => p.serviceAccountName));
  return [
    ...[...accounts].map((name) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(name) })),
    ...s.clusterPermissions.flatMap((p, i) => [
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: meta(`csi-handover-olm-${i}`, false), rules: p.rules },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: meta(`csi-handover-olm-${i}`, false),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `csi-handover-olm-${i}` },
        subjects: [{ kind: 'ServiceAccount', name: p.serviceAccountName, namespace: ns }],
      },
    ]),
    ...s.permissions.flatMap((p, i) => [
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: meta(`csi-handover-olm-${i}`), rules: p.rules },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta(`csi-handover-olm-${i}`),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `csi-handover-olm-${i}` },
        subjects: [{ kind: 'ServiceAccount', name: p.serviceAccountName, namespace: ns }],
      },
    ]),
    ...s.deployments.map((d) => ({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: meta(d.name), spec: d.spec })),
    // The bundle's other RBAC manifests (the drivers' write role, which the admin binds per namespace).
    ...readdirSync(bundle)
      .filter((f) => f.includes('_rbac.authorization.k8s.io_'))
      .map((f) => parse(readFileSync(join(bundle, f), 'utf8')) as object),
  ];
}

const write = (name: string, objs: object[]): string => {
  const file = join(dir, name);
  writeFileSync(file, objs.map((o) => stringify(o)).join('---\n'));
  return file;
};

/** The serving pair OLM issues for a CSV's webhook (Secret <deployment>-service-cert: tls.crt, tls.key). */
async function issueServingCertAsOlmWould(): Promise<void> {
  const host = `csi-handover-service.${OPERATOR_NAMESPACE}.svc`;
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    `/CN=${host}`,
    '-addext',
    `subjectAltName=DNS:${host},DNS:${host}.cluster.local`,
    '-keyout',
    join(dir, 'tls.key'),
    '-out',
    join(dir, 'tls.crt'),
  ]);
  await kubectl(
    '-n',
    OPERATOR_NAMESPACE,
    'create',
    'secret',
    'tls',
    'csi-handover-service-cert',
    `--cert=${join(dir, 'tls.crt')}`,
    `--key=${join(dir, 'tls.key')}`,
  );
}

beforeAll(async () => {
  await standaloneSampleAt(http, LEVELS[4] ?? 'Debug');
});

afterAll(async () => {
  // The Deployment first: its replicas release the operator Lease while their permissions still exist.
  await kubectl('-n', OPERATOR_NAMESPACE, 'delete', 'deployment', 'csi-handover', '--ignore-not-found', '--wait=true').catch(() => undefined);
  await waitOperatorPodsGone(http).catch(() => undefined);
  await kubectl('delete', '-f', write('olm-install.yaml', installedByOlm()), '--ignore-not-found', '--wait=true').catch(() => undefined);
  await kubectl('-n', OPERATOR_NAMESPACE, 'delete', 'clusterserviceversion', '--all', '--ignore-not-found').catch(() => undefined);
  await kubectl('-n', OPERATOR_NAMESPACE, 'delete', 'secret', 'csi-handover-service-cert', '--ignore-not-found').catch(() => undefined);
  const olmCrds = thirdPartyDir('olm-crds-v0.45.0');
  for (const f of readdirSync(olmCrds).filter((f) => f.endsWith('.yaml')))
    await kubectl('delete', '-f', join(olmCrds, f), '--ignore-not-found').catch(() => undefined);
  await installOperator(http); // later test files expect the kustomize install
  rmSync(dir, { recursive: true, force: true });
});

describe('the OLM bundle', () => {
  it("is accepted, strictly validated, by OLM's own CRDs on the API server", async () => {
    const olmCrds = thirdPartyDir('olm-crds-v0.45.0');
    for (const f of readdirSync(olmCrds).filter((f) => f.endsWith('.yaml'))) {
      await kubectl('apply', '--server-side', `--field-manager=${FIELD_MANAGER}`, '-f', join(olmCrds, f));
    }
    await kubectl('wait', '--for=condition=Established', '--timeout=60s', 'crd/clusterserviceversions.operators.coreos.com');
    const out = await kubectl(
      'apply',
      '--server-side',
      '--force-conflicts',
      `--field-manager=${FIELD_MANAGER}`,
      '--validate=strict',
      '-n',
      OPERATOR_NAMESPACE,
      '-f',
      bundle,
    );
    expect(out).toMatch(/clusterserviceversion\.operators\.coreos\.com\/csi-handover\.v0\.1\.0 serverside-applied/);
    expect(out).toMatch(/customresourcedefinition\.apiextensions\.k8s\.io\/clustercsidrivers\.operator\.openshift\.io serverside-applied/);
    expect(out).toMatch(/service\/csi-handover-metrics serverside-applied/);
    // What the API server stored is what the bundle says (nothing pruned as unknown).
    const stored = JSON.parse(await kubectl('-n', OPERATOR_NAMESPACE, 'get', 'clusterserviceversion', 'csi-handover.v0.1.0', '-o', 'json')) as Csv;
    expect(stored.spec.install.spec.deployments[0]?.spec).toEqual(csv.spec.install.spec.deployments[0]?.spec);
  });

  it("installed from the CSV's permissions and Deployment, the operator runs under restricted Pod Security and hands a lease over", async () => {
    await removeKustomizeInstall(http);
    await issueServingCertAsOlmWould();
    await kubectl('apply', '-f', write('olm-install.yaml', installedByOlm()));
    await waitRolloutComplete(http, OPERATOR_NAMESPACE, 'csi-handover', 180_000);
    const pods = await operatorPods(http);
    expect(pods.length).toBe(csv.spec.install.spec.deployments[0]?.spec?.replicas);
    expect(pods[0]?.spec?.containers[0]?.env?.find((e) => e.name === 'WEBHOOK_CERT_SOURCE')?.value).toBe('olm');
    await waitFor('a replica to lead', 60_000, async () => (await operatorLeader(http)).metadata?.name !== undefined, 500);

    const { report } = await handOverByLevel(http, LEVELS[2] ?? 'Normal');
    expect(report.leases.filter((h) => leases.includes(h.lease)).map((h) => h.releasedBy)).toEqual(leases.map(() => 'operator'));
    const d = await http.get<V1Deployment>(deploymentPath(NS, SAMPLE_DEPLOYMENT));
    expect(templateVerbosity(d)).toBe(2); // and it reconciled the log level
  });
});
