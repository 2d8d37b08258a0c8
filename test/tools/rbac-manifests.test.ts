// The shipped roles (config/default), read as the API server would: cluster-wide, the operator may write nothing
// of a driver's — no Lease, pod, Deployment, DaemonSet, Secret or Event in any namespace. Those writes are
// ClusterRole csi-handover-driver's, which config/ binds nowhere: each driver namespace binds it.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { binDir, repoRoot } from '../../hack/lib/cluster.js';

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}
interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: Rule[];
  roleRef?: { kind: string; name: string };
}

const WRITE_VERBS = ['create', 'update', 'patch', 'delete', 'deletecollection', '*'];
const objects = async (): Promise<Obj[]> =>
  parseAllDocuments((await promisify(execFile)(join(binDir, 'kubectl'), ['kustomize', join(repoRoot, 'config', 'default')])).stdout).map(
    (d) => d.toJS() as Obj,
  );
const writes = (rules: Rule[]) =>
  rules.flatMap((r) =>
    r.verbs
      .filter((v) => WRITE_VERBS.includes(v))
      .flatMap((v) =>
        r.resources.map((res) => `${v} ${r.apiGroups[0] ? `${r.apiGroups[0]}/` : ''}${res}${r.resourceNames ? ` (${r.resourceNames.join(',')})` : ''}`),
      ),
  );

describe('config/rbac', () => {
  it("grants cluster-wide no write to any driver's objects: only its CR status, its own reports, its own webhook configuration, access and token reviews", async () => {
    // (A SubjectAccessReview writes nothing: it asks whether the witness may attest.)
    const objs = await objects();
    const bound = objs.filter((o) => o.kind === 'ClusterRoleBinding').map((b) => b.roleRef?.name);
    expect(bound).toEqual(['csi-handover']);
    const role = objs.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'csi-handover');
    expect(writes(role?.rules ?? []).sort()).toEqual([
      'create authentication.k8s.io/tokenreviews',
      'create authorization.k8s.io/selfsubjectaccessreviews',
      'create authorization.k8s.io/subjectaccessreviews',
      'create csi-handover.io/csihandoverreports',
      'delete csi-handover.io/csihandoverreports',
      'patch admissionregistration.k8s.io/mutatingwebhookconfigurations (csi-handover)',
      'patch csi-handover.io/csihandoverreports',
      'patch csi-handover.io/csihandoverreports/status',
      'patch operator.openshift.io/clustercsidrivers/status',
    ]);
    expect(role?.rules?.some((r) => r.verbs.includes('*') || r.resources.includes('*') || r.apiGroups.includes('*'))).toBe(false);
  });

  it("keeps the writes in drivers' namespaces in csi-handover-driver, bound by no ClusterRoleBinding", async () => {
    const driver = (await objects()).find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'csi-handover-driver');
    expect(writes(driver?.rules ?? []).sort()).toEqual([
      'create events',
      'patch events',
      'patch pods',
      'update apps/daemonsets',
      'update apps/deployments',
      'update coordination.k8s.io/leases',
    ]);
  });

  it('writes in other namespaces only through Roles there: its own (leader election, webhook Secret) and "default" (Events)', async () => {
    const roles = (await objects()).filter((o) => o.kind === 'Role');
    expect(roles.map((r) => `${r.metadata.namespace}/${r.metadata.name}`).sort()).toEqual([
      'csi-handover/csi-handover-leader-election',
      'csi-handover/csi-handover-webhook',
      'default/csi-handover-events',
    ]);
  });
});
