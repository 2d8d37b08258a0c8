// Least privilege, proven on the real API server. The operator runs under its own ServiceAccount with the shipped
// roles; the API server audits every request that account makes (hack/cluster.sh). After a handover:
// - every request it made was allowed, and every write went to a driver's namespace, its own, or "default" (Events);
// - its write grants outside its own namespace are exactly those of ClusterRole csi-handover-driver, which is bound
//   only where drivers run: with the account's own token, a Lease or pod outside them cannot be written;
// - a driver in a namespace without that binding is reported Degraded (NoWriteAccess) and nothing is written to
//   it; binding the role clears it.
import { join } from 'node:path';
import { operatorAudit, resourceOf, WRITES } from '../../hack/lib/audit.js';
import type { V1Deployment, V1Lease } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { DRIVER_LABEL } from '../../src/api/names.js';
import { microTime } from '../../src/leaderelection/lease-record.js';
import { KubeHttp, PatchType } from '../../src/kube/http.js';
import { isForbidden } from '../../src/kube/errors.js';
import { fixedToken } from '../../src/kube/config.js';
import { kubeconfigAccess } from '../../src/kube/kubeconfig.js';
import { clusterHttp, kubeconfigPath, kubectl, repoRoot, SAMPLE_LEASES, SAMPLE_NAMESPACE, waitFor } from '../../hack/lib/cluster.js';
import { grantDriverNamespace, handOverByLevel, LEVELS, OPERATOR_NAMESPACE, standaloneSampleAt } from '../../hack/lib/operator.js';
import { waitRolloutComplete } from '../../hack/lib/rollout.js';

const http = clusterHttp();
const OUTSIDE = `rbac-outside-${Date.now().toString(36)}`;
const UNBOUND = `rbac-unbound-${Date.now().toString(36)}`;
const UNBOUND_DRIVER = 'unbound.csi.example.com';

/** A client with the operator's own ServiceAccount token (TokenRequest), as its pods have. */
async function asOperator(): Promise<KubeHttp> {
  const tr = await http.request<{ status: { token: string } }>('POST', `/api/v1/namespaces/${OPERATOR_NAMESPACE}/serviceaccounts/csi-handover/token`, {
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
  });
  const admin = kubeconfigAccess(kubeconfigPath);
  return new KubeHttp({ server: admin.server, ca: admin.ca, serverName: admin.serverName, insecureSkipTLSVerify: false, token: fixedToken(tr.status.token) });
}

let since = 0;

beforeAll(async () => {
  await standaloneSampleAt(http, LEVELS[4] ?? 'Debug');
  since = Date.now();
  await handOverByLevel(http, LEVELS[2] ?? 'Normal');
  await kubectl('create', 'namespace', OUTSIDE);
  await http.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${OUTSIDE}/leases`, {
    body: {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'someone-elses-leader', namespace: OUTSIDE },
      spec: { holderIdentity: 'someone', leaseDurationSeconds: 15, renewTime: microTime(Date.now()) },
    },
  });
});

afterAll(async () => {
  await kubectl('delete', 'namespace', OUTSIDE, UNBOUND, '--ignore-not-found', '--wait=false').catch(() => undefined);
  await kubectl('delete', 'clustercsidriver', UNBOUND_DRIVER, '--ignore-not-found').catch(() => undefined);
});

describe('least privilege', () => {
  it('every request the operator made was allowed, and it wrote only where drivers run, in its own namespace, or Events in "default"', () => {
    const requests = operatorAudit(since);
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.filter((e) => e.responseStatus?.code === 403).map((e) => `${e.verb} ${resourceOf(e)} ${e.objectRef?.namespace ?? ''}`)).toEqual([]);
    const writes = requests.filter((e) => WRITES.has(e.verb));
    const where = new Set(writes.map((e) => e.objectRef?.namespace ?? '(cluster)'));
    expect([...where].filter((ns) => ![SAMPLE_NAMESPACE, OPERATOR_NAMESPACE, 'default', '(cluster)'].includes(ns))).toEqual([]);
    // Cluster-scoped writes: only the CR's status, the driver's report, the webhook configuration it owns a part of,
    // access reviews.
    const clusterScoped = [...new Set(writes.filter((e) => !e.objectRef?.namespace).map(resourceOf))];
    expect(
      clusterScoped.filter(
        (r) =>
          ![
            'operator.openshift.io/clustercsidrivers/status',
            'csi-handover.io/csihandoverreports',
            'csi-handover.io/csihandoverreports/status',
            'admissionregistration.k8s.io/mutatingwebhookconfigurations',
            'authorization.k8s.io/selfsubjectaccessreviews',
            // Whether the node witness may attest (src/controller/witness-policy.ts): a question, not a write.
            'authorization.k8s.io/subjectaccessreviews',
          ].includes(r),
      ),
    ).toEqual([]);
    // In the driver's namespace it released leases and patched pods: the handover it just did.
    const inDriver = new Set(writes.filter((e) => e.objectRef?.namespace === SAMPLE_NAMESPACE).map((e) => `${e.verb} ${resourceOf(e)}`));
    expect(inDriver).toContain('update coordination.k8s.io/leases');
    expect(inDriver).toContain('patch pods');
  });

  it('its roles grant exactly the verbs it has used since the cluster started, but for requests on rare paths', async () => {
    // What the shipped roles grant it (config/default, and the driver role the sample's namespace binds).
    interface Rule {
      apiGroups: string[];
      resources: string[];
      verbs: string[];
    }
    const objs = parseAllDocuments(await kubectl('kustomize', join(repoRoot, 'config', 'default'))).map((d) => d.toJS() as { kind: string; rules?: Rule[] });
    const granted = new Set(
      objs
        .filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')
        .flatMap((o) =>
          (o.rules ?? []).flatMap((r) => r.verbs.flatMap((v) => r.resources.map((res) => `${v} ${r.apiGroups[0] ? `${r.apiGroups[0]}/` : ''}${res}`))),
        ),
    );
    const used = new Set(
      operatorAudit(0, ['ResponseStarted', 'ResponseComplete'])
        .filter((e) => (e.responseStatus?.code ?? 0) < 400)
        .map((e) => `${e.verb} ${resourceOf(e)}`),
    );
    // Requests made only on paths a single run may not take, each taken elsewhere in the suite.
    const rare: Record<string, string> = {
      'get pods': 'an admission while the leader is not yet seen stopping: its pod is read again (webhook.test.ts)',
      'update secrets': 'webhook certificate rotation (webhook.test.ts)',
      'create secrets': 'the first start: the webhook certificate is issued',
      'create coordination.k8s.io/leases': "the first start: the operator's own Lease is created",
      'patch events': 'the same Event again (aggregation)',
      // A server-side apply that makes an object is authorized as create too, but audited only as its patch.
      'create csi-handover.io/csihandoverreports': "a driver's first report, made by server-side apply",
      'delete csi-handover.io/csihandoverreports':
        "a CR made again while its predecessor's report is still there (openshift-crd.test.ts; the garbage collector is usually first)",
    };
    expect([...granted].filter((g) => !used.has(g) && !(g in rare)).sort(), 'granted but never used').toEqual([]);
    expect([...used].filter((u) => !granted.has(u)).sort(), 'used but not granted (through another binding?)').toEqual([]);
  });

  it("with its own token, it cannot write a Lease or a pod outside the drivers' namespaces, and can in them", async () => {
    const op = await asOperator();
    const lease = await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${OUTSIDE}/leases/someone-elses-leader`);
    // The very write a release is, on someone else's lease: refused.
    await expect(
      op.request('PUT', `/apis/coordination.k8s.io/v1/namespaces/${OUTSIDE}/leases/someone-elses-leader`, {
        body: { ...lease, spec: { ...lease.spec, holderIdentity: '' } },
      }),
    ).rejects.toSatisfy(isForbidden);
    // Listing them is allowed everywhere (its informers see every driver's leases).
    await expect(op.get(`/apis/coordination.k8s.io/v1/namespaces/${OUTSIDE}/leases`)).resolves.toBeDefined();
    // Nor a pod, nor a Deployment there (authorization comes before the lookup: 403 whether or not they exist).
    await expect(op.patch(`/api/v1/namespaces/${OUTSIDE}/pods/any`, { metadata: { annotations: { x: 'y' } } }, PatchType.merge)).rejects.toSatisfy(isForbidden);
    await expect(
      op.request('PUT', `/apis/apps/v1/namespaces/${OUTSIDE}/deployments/any`, {
        body: { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'any', namespace: OUTSIDE } },
      }),
    ).rejects.toSatisfy(isForbidden);
    // In the driver's namespace the same write is allowed (a server-side dry run: nothing changes).
    const name = Object.values(SAMPLE_LEASES)[0] ?? '';
    const driverLease = await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${SAMPLE_NAMESPACE}/leases/${name}`);
    await expect(
      op.request('PUT', `/apis/coordination.k8s.io/v1/namespaces/${SAMPLE_NAMESPACE}/leases/${name}`, {
        query: { dryRun: 'All' },
        body: driverLease,
      }),
    ).resolves.toBeDefined();
  });

  it('a driver in a namespace without the binding: Degraded NoWriteAccess, nothing written; binding the role clears it and the level is written', async () => {
    await kubectl('create', 'namespace', UNBOUND);
    const labels = { app: 'ctrl', [DRIVER_LABEL]: UNBOUND_DRIVER };
    await http.request('POST', `/apis/apps/v1/namespaces/${UNBOUND}/deployments`, {
      body: {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'ctrl', namespace: UNBOUND, labels },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'ctrl' } },
          template: {
            metadata: { labels },
            spec: {
              terminationGracePeriodSeconds: 2,
              containers: [
                {
                  name: 'csi-attacher',
                  image: 'csi-handover.local/shell:v1',
                  command: ['sh', '-c', 'trap "exit 0" TERM; while :; do sleep 1; done', '--', '--v=2'],
                },
              ],
            },
          },
        },
      },
    });
    await http.request('POST', '/apis/operator.openshift.io/v1/clustercsidrivers', {
      body: {
        apiVersion: 'operator.openshift.io/v1',
        kind: 'ClusterCSIDriver',
        metadata: { name: UNBOUND_DRIVER },
        spec: { managementState: 'Managed', logLevel: 'Debug' },
      },
    });
    const cr = `/apis/operator.openshift.io/v1/clustercsidrivers/${UNBOUND_DRIVER}`;
    const degraded = async () =>
      (await http.get<{ status?: { conditions?: { type: string; status: string; reason: string; message: string }[] } }>(cr)).status?.conditions?.find(
        (c) => c.type === 'CSIHandoverDegraded',
      );
    const d = await waitFor(
      'Degraded NoWriteAccess',
      60_000,
      async () => {
        const c = await degraded();
        return c?.reason === 'NoWriteAccess' && c;
      },
      500,
    );
    expect(d.status).toBe('True');
    expect(d.message).toContain(`namespace ${UNBOUND}`);
    expect(d.message).toContain('update leases');
    expect(d.message).toContain('kubectl -n');
    // Not written: the Deployment keeps --v=2 (no update tried).
    const dep = await http.get<V1Deployment>(`/apis/apps/v1/namespaces/${UNBOUND}/deployments/ctrl`);
    expect(dep.spec?.template.spec?.containers[0]?.command).toContain('--v=2');

    await grantDriverNamespace(http, UNBOUND);
    // A denial is remembered 30 s; then the level is written and the condition clears.
    await waitFor(
      'Degraded cleared and --v=4 written',
      120_000,
      async () => {
        const c = await degraded();
        const now = await http.get<V1Deployment>(`/apis/apps/v1/namespaces/${UNBOUND}/deployments/ctrl`);
        return c?.status === 'False' && now.spec?.template.spec?.containers[0]?.command?.includes('--v=4');
      },
      1_000,
    );
    await waitRolloutComplete(http, UNBOUND, 'ctrl', 120_000);
  });
});
