// The bad-input matrix: invalid or foreign ClusterCSIDrivers, workloads the operator cannot parse or follow,
// malformed Leases and write access taken away mid-run. Each input must be answered with a clear signal (a
// condition on the CR, a line in the operator's log, or the API server refusing the input outright) and nothing may
// be written to any workload, pod or lease because of it — judged by the API server's audit log of the operator's
// ServiceAccount, not by the operator's own account. The file ends with the count.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { DRIVER_LABEL } from '../../src/api/names.js';
import { KubeApiError } from '../../src/kube/errors.js';
import { operatorAudit, resourceOf, WRITES } from '../../hack/lib/audit.js';
import { clusterHttp, kubectl, localDir, repoRoot, waitFor } from '../../hack/lib/cluster.js';
import { grantDriverNamespace, installOperator, OPERATOR_NAMESPACE, operatorPods, setOperatorMode } from '../../hack/lib/operator.js';

const http = clusterHttp();
const FM = 'csi-handover-bad-input-test';
const NS = 'bad-input';
const WL_DRIVER = 'bad-workloads.csi.test'; // Debug: every workload of it would be written to --v=4
const CRD_FILE = join(repoRoot, 'crds', 'operator.openshift.io_clustercsidrivers.yaml');
const CR_API = '/apis/operator.openshift.io/v1/clustercsidrivers';
const SHELL = 'csi-handover.local/shell:v1';
const sleeper = (args: string[] = ['--v=4']): V1Container => ({ name: 'main', image: SHELL, command: ['sh', '-c', 'exec sleep 100000'], args });

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
interface Case {
  group: 'ClusterCSIDriver' | 'workload' | 'Lease' | 'RBAC';
  input: string;
  /** makes the input; a KubeApiError it throws is the API server refusing it, when `refused` expects that */
  act: () => Promise<unknown>;
  /** the evidence the operator answered, once it did (polled) */
  signal?: (since: Date) => Promise<string | undefined>;
  refused?: RegExp;
  undo?: () => Promise<unknown>;
}

const apply = (path: string, body: object) => http.apply(path, body, FM);
const remove = (path: string) => http.request('DELETE', path).catch(() => undefined);

async function cr(name: string, spec?: Record<string, unknown>): Promise<void> {
  await http.request('POST', CR_API, {
    body: { apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', metadata: { name }, ...(spec ? { spec } : {}) },
  });
}

async function deployment(
  name: string,
  driver: string,
  containers: V1Container[],
  extra: { replicas?: number; selector?: object; hostname?: string; initContainers?: V1Container[] } = {},
): Promise<void> {
  const labels = { app: name, [DRIVER_LABEL]: driver };
  await apply(`/apis/apps/v1/namespaces/${NS}/deployments/${name}`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS, labels },
    spec: {
      replicas: extra.replicas ?? 0,
      selector: extra.selector ?? { matchLabels: { app: name } },
      template: {
        metadata: { labels },
        spec: {
          containers,
          ...(extra.initContainers ? { initContainers: extra.initContainers } : {}),
          ...(extra.hostname ? { hostname: extra.hostname } : {}),
          terminationGracePeriodSeconds: 1,
        },
      },
    },
  });
}

async function conditionOf(driver: string, type: string): Promise<Condition | undefined> {
  const obj = await http.get<{ status?: { conditions?: Condition[] } }>(`${CR_API}/${driver}`).catch(() => undefined);
  return obj?.status?.conditions?.find((c) => c.type === `CSIHandover${type}`);
}

/** Evidence when the driver's condition `type` has `status`/`reason` and its message holds `text`. */
const condition =
  (driver: string, type: string, status: string, reason: string, text = '') =>
  async (): Promise<string | undefined> => {
    const c = await conditionOf(driver, type);
    return c && c.status === status && c.reason === reason && (c.message ?? '').includes(text) ? `${type}=${status} ${reason}: ${c.message}` : undefined;
  };

/** Evidence when an operator replica logged one line holding every part. */
const logged =
  (...parts: string[]) =>
  async (since: Date): Promise<string | undefined> => {
    const out = await kubectl(
      '-n',
      OPERATOR_NAMESPACE,
      'logs',
      '-l',
      'app.kubernetes.io/name=csi-handover',
      '--since-time',
      since.toISOString(),
      '--tail=-1',
    ).catch(() => '');
    return out.split('\n').find((l) => parts.every((p) => l.includes(p)));
  };

const leasePath = (name: string) => `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${name}`;
const microNow = () => new Date().toISOString().replace('Z', '000Z');
async function lease(name: string, spec: Record<string, unknown>): Promise<void> {
  await http.request('POST', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`, {
    body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace: NS }, spec },
  });
}
const held = (holder: string): Record<string, unknown> => ({
  holderIdentity: holder,
  leaseDurationSeconds: 15,
  acquireTime: microNow(),
  renewTime: microNow(),
  leaseTransitions: 0,
});
const refusedLease = (name: string, reason: string) => logged('not releasing this lease', `"lease":"${NS}/${name}"`, `"reason":"${reason}"`);

const crCase = (input: string, name: string, spec: Record<string, unknown> | undefined, signal: Case['signal'], workload = true): Case => ({
  group: 'ClusterCSIDriver',
  input,
  act: async () => {
    if (workload) await deployment(`for-${name.split('.')[0]}`, name, [sleeper(['--v=2'])]);
    await cr(name, spec);
  },
  signal,
  undo: async () => {
    await remove(`${CR_API}/${name}`);
    await remove(`/apis/apps/v1/namespaces/${NS}/deployments/for-${name.split('.')[0]}`);
  },
});

const unparsable = (input: string, name: string, containers: V1Container[], extra: Parameters<typeof deployment>[3] = {}): Case => ({
  group: 'workload',
  input,
  act: () => deployment(name, WL_DRIVER, containers, extra),
  signal: condition(WL_DRIVER, 'Degraded', 'True', 'UnparsableArgs', `Deployment ${NS}/${name} not rewritten`),
  undo: () => remove(`/apis/apps/v1/namespaces/${NS}/deployments/${name}`),
});

const CASES: Case[] = [
  // ClusterCSIDriver: the CRD refuses most bad values; with it loosened (as an older or hand-edited CRD would be),
  // the operator's own validation answers. Each CR's Deployment sits at --v=2, which a valid Debug would change.
  crCase(
    'logLevel "Chatty"',
    'c-chatty.csi.test',
    { logLevel: 'Chatty' },
    condition('c-chatty.csi.test', 'Degraded', 'True', 'InvalidSpec', 'spec.logLevel: "Chatty"'),
  ),
  crCase(
    'logLevel "debug" (wrong case)',
    'c-lower.csi.test',
    { logLevel: 'debug' },
    condition('c-lower.csi.test', 'Degraded', 'True', 'InvalidSpec', 'spec.logLevel: "debug"'),
  ),
  // OpenShift's LogLevel type takes "" for Normal: odd, not invalid; its workload is already at --v=2.
  crCase(
    'logLevel "" (OpenShift\'s Normal)',
    'c-empty.csi.test',
    { logLevel: '' },
    condition('c-empty.csi.test', 'Progressing', 'False', 'AsExpected', 'at --v=2'),
  ),
  crCase(
    'managementState "Sometimes"',
    'c-sometimes.csi.test',
    { managementState: 'Sometimes', logLevel: 'Debug' },
    condition('c-sometimes.csi.test', 'Degraded', 'True', 'InvalidSpec', 'spec.managementState: "Sometimes"'),
  ),
  crCase(
    'managementState ""',
    'c-nostate.csi.test',
    { managementState: '', logLevel: 'Debug' },
    condition('c-nostate.csi.test', 'Degraded', 'True', 'InvalidSpec', 'spec.managementState: ""'),
  ),
  crCase(
    'operatorLogLevel "Loud"',
    'c-loud.csi.test',
    { operatorLogLevel: 'Loud', logLevel: 'Debug' },
    condition('c-loud.csi.test', 'Degraded', 'True', 'InvalidSpec', 'spec.operatorLogLevel: "Loud"'),
  ),
  crCase(
    'an empty spec (defaults: Managed, Normal; its workload is already at --v=2)',
    'c-emptyspec.csi.test',
    {},
    condition('c-emptyspec.csi.test', 'Progressing', 'False', 'AsExpected', 'at --v=2'),
  ),
  {
    group: 'ClusterCSIDriver',
    input: 'no spec at all',
    act: () => cr('c-nospec.csi.test'),
    refused: /spec/,
    undo: () => remove(`${CR_API}/c-nospec.csi.test`),
  },
  crCase(
    'a CR for a driver nobody labelled',
    'c-nobody.csi.test',
    { logLevel: 'Debug' },
    condition('c-nobody.csi.test', 'Available', 'False', 'NoWorkloadsFound', `${DRIVER_LABEL}=c-nobody.csi.test`),
    false,
  ),
  crCase(
    'Unmanaged, asking for another level',
    'c-unmanaged.csi.test',
    { managementState: 'Unmanaged', logLevel: 'Debug' },
    condition('c-unmanaged.csi.test', 'Progressing', 'False', 'AsExpected', 'Unmanaged: not written'),
  ),
  crCase('Removed', 'c-removed.csi.test', { managementState: 'Removed', logLevel: 'Debug' }, condition('c-removed.csi.test', 'Available', 'False', 'Removed')),
  {
    group: 'ClusterCSIDriver',
    input: 'logLevel 42 (not a string)',
    act: () => cr('c-number.csi.test', { logLevel: 42 }),
    refused: /logLevel/,
    undo: () => remove(`${CR_API}/c-number.csi.test`),
  },
  {
    group: 'ClusterCSIDriver',
    input: 'a name that is not a DNS subdomain',
    act: () => cr('Not_A_Driver', { logLevel: 'Debug' }),
    refused: /Not_A_Driver|metadata.name/,
  },

  // Workloads of a Debug driver (--v=4 wanted) whose verbosity cannot be read: none is written, each is named.
  unparsable('"--v" with no value', 'w-novalue', [sleeper(['--v'])]),
  unparsable('"--v" followed by a word', 'w-word', [sleeper(['--v', 'abc'])]),
  unparsable('"--v=-1"', 'w-negative', [sleeper(['--v=-1'])]),
  unparsable('"--v=2.5"', 'w-fraction', [sleeper(['--v=2.5'])]),
  unparsable('"-v=high"', 'w-high', [sleeper(['-v=high'])]),
  unparsable('"--v=" (empty)', 'w-emptyvalue', [sleeper(['--v='])]),
  unparsable('"-v +3"', 'w-plus', [sleeper(['-v', '+3'])]),
  unparsable('a bad "--v" in the command', 'w-command', [{ name: 'main', image: SHELL, command: ['sh', '-c', 'exec sleep 100000', '--v=x'] }]),
  unparsable('a bad "--v" in an init container', 'w-init', [sleeper(['--v=2'])], {
    initContainers: [{ name: 'init', image: SHELL, command: ['true'], args: ['--v=?'] }],
  }),
  unparsable('one good and one bad container (neither is written)', 'w-mixed', [sleeper(['--v=2']), { ...sleeper(['--v=two']), name: 'other' }]),
  {
    group: 'workload',
    input: 'no verbosity flag in any container',
    act: () => deployment('w-noflag', WL_DRIVER, [sleeper(['--verbose'])]),
    signal: condition(WL_DRIVER, 'Available', 'True', 'AsExpected', `Deployment ${NS}/w-noflag has no klog verbosity flag`),
    undo: () => remove(`/apis/apps/v1/namespaces/${NS}/deployments/w-noflag`),
  },
  {
    group: 'workload',
    input: 'a matchExpressions selector (its pods cannot be followed)',
    act: () => deployment('w-expr', WL_DRIVER, [sleeper(['--v=4'])], { selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['w-expr'] }] } }),
    signal: condition(WL_DRIVER, 'Available', 'True', 'AsExpected', `Deployment ${NS}/w-expr selects its pods with matchExpressions`),
    undo: () => remove(`/apis/apps/v1/namespaces/${NS}/deployments/w-expr`),
  },
  {
    group: 'workload',
    input: 'a StatefulSet labelled for a driver (not a kind the operator manages)',
    act: async () => {
      await apply(`/apis/apps/v1/namespaces/${NS}/statefulsets/w-sts`, {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: { name: 'w-sts', namespace: NS, labels: { [DRIVER_LABEL]: 'c-sts.csi.test' } },
        spec: {
          replicas: 0,
          serviceName: 'w-sts',
          selector: { matchLabels: { app: 'w-sts' } },
          template: { metadata: { labels: { app: 'w-sts' } }, spec: { containers: [sleeper(['--v=2'])] } },
        },
      });
      await cr('c-sts.csi.test', { logLevel: 'Debug' });
    },
    signal: condition('c-sts.csi.test', 'Available', 'False', 'NoWorkloadsFound', `StatefulSet ${NS}/w-sts is labelled`),
    undo: async () => {
      await remove(`${CR_API}/c-sts.csi.test`);
      await remove(`/apis/apps/v1/namespaces/${NS}/statefulsets/w-sts`);
    },
  },
  {
    group: 'workload',
    input: 'a DaemonSet with a bad "--v"',
    act: () =>
      apply(`/apis/apps/v1/namespaces/${NS}/daemonsets/w-ds`, {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'w-ds', namespace: NS, labels: { [DRIVER_LABEL]: WL_DRIVER } },
        spec: {
          selector: { matchLabels: { app: 'w-ds' } },
          template: { metadata: { labels: { app: 'w-ds' } }, spec: { nodeSelector: { nowhere: 'true' }, containers: [sleeper(['--v=loud'])] } },
        },
      }),
    signal: condition(WL_DRIVER, 'Degraded', 'True', 'UnparsableArgs', `DaemonSet ${NS}/w-ds not rewritten`),
    undo: () => remove(`/apis/apps/v1/namespaces/${NS}/daemonsets/w-ds`),
  },

  // Leases in the namespace of a managed controller (its one pod, "anchor", holds nothing): each one the
  // operator cannot tie to a dead holder is refused, logged once with its reason, and left as it is.
  {
    group: 'Lease',
    input: 'no holderIdentity',
    act: () => lease('l-noholder', { leaseDurationSeconds: 15, renewTime: microNow() }),
    signal: refusedLease('l-noholder', 'malformed-lease'),
    undo: () => remove(leasePath('l-noholder')),
  },
  {
    group: 'Lease',
    input: 'no renewTime',
    act: () => lease('l-norenew', { holderIdentity: 'ghost', leaseDurationSeconds: 15 }),
    signal: refusedLease('l-norenew', 'unknown-identity'),
    undo: () => remove(leasePath('l-norenew')),
  },
  {
    group: 'Lease',
    input: 'no leaseDurationSeconds',
    act: () => lease('l-noduration', { holderIdentity: 'anchor-ghost', renewTime: microNow() }),
    signal: refusedLease('l-noduration', 'unknown-identity'),
    undo: () => remove(leasePath('l-noduration')),
  },
  {
    group: 'Lease',
    input: 'leaseDurationSeconds 0',
    act: () => lease('l-zero', { ...held('ghost'), leaseDurationSeconds: 0 }),
    refused: /leaseDurationSeconds/,
    undo: () => remove(leasePath('l-zero')),
  },
  {
    group: 'Lease',
    input: 'leaseDurationSeconds -5',
    act: () => lease('l-negative', { ...held('ghost'), leaseDurationSeconds: -5 }),
    refused: /leaseDurationSeconds/,
    undo: () => remove(leasePath('l-negative')),
  },
  {
    group: 'Lease',
    input: 'renewTime not a time',
    act: () => lease('l-badtime', { ...held('ghost'), renewTime: 'yesterday' }),
    refused: /renewTime|time/,
    undo: () => remove(leasePath('l-badtime')),
  },
  {
    group: 'Lease',
    input: 'a holder that matches no pod',
    act: () => lease('l-ghost', held('ghost-pod-7f9c')),
    signal: refusedLease('l-ghost', 'unknown-identity'),
    undo: () => remove(leasePath('l-ghost')),
  },
  {
    group: 'Lease',
    input: 'a client-go style holder (<pod>_<uuid>) of no pod',
    act: () => lease('l-suffix', held('ghost_3f2a9c1e-11')),
    signal: refusedLease('l-suffix', 'unknown-identity'),
    undo: () => remove(leasePath('l-suffix')),
  },
  {
    group: 'Lease',
    input: "a holder that is a pod in another namespace (the operator's own)",
    act: async () => lease('l-elsewhere', held((await operatorPods(http))[0]?.metadata?.name ?? 'csi-handover-x')),
    signal: refusedLease('l-elsewhere', 'unknown-identity'),
    undo: () => remove(leasePath('l-elsewhere')),
  },
  {
    group: 'Lease',
    input: "a holder that is a node's name (no hostNetwork pod there)",
    act: () => lease('l-node', held('node-1')),
    signal: refusedLease('l-node', 'unknown-identity'),
    undo: () => remove(leasePath('l-node')),
  },
  {
    group: 'Lease',
    input: 'a holder that names two pods (both with hostname "twin")',
    act: () => lease('l-twin', held('twin')),
    signal: refusedLease('l-twin', 'ambiguous-identity'),
    undo: () => remove(leasePath('l-twin')),
  },

  // Write access taken away while the operator runs (it remembers a grant for up to 10 minutes): the write it then
  // tries is refused by the API server, and the CR says so.
  {
    group: 'RBAC',
    input: 'the driver role binding deleted, then a new level asked for',
    act: async () => {
      await http.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings/csi-handover-driver`);
      await deployment('r-revoked', 'r-revoked.csi.test', [sleeper(['--v=2'])]);
      await cr('r-revoked.csi.test', { logLevel: 'Debug' });
    },
    // The write is refused (403), the remembered grant forgotten, and the retry asks again: NoWriteAccess.
    signal: condition('r-revoked.csi.test', 'Degraded', 'True', 'NoWriteAccess', `namespace ${NS}`),
    undo: async () => {
      await remove(`${CR_API}/r-revoked.csi.test`);
      await remove(`/apis/apps/v1/namespaces/${NS}/deployments/r-revoked`);
      await grantDriverNamespace(http, NS);
    },
  },
];

/** Successful writes by the operator since `since` to a workload, pod or Lease in the namespace every input lives in, with when (ms). */
function forbiddenWrites(since: number): { at: number; write: string }[] {
  const touched = new Set(['deployments', 'daemonsets', 'statefulsets', 'replicasets', 'pods', 'leases']);
  return operatorAudit(since)
    .filter((e) => WRITES.has(e.verb) && (e.responseStatus?.code ?? 0) < 400)
    .filter((e) => e.objectRef?.namespace === NS && touched.has(e.objectRef.resource ?? ''))
    .map((e) => ({ at: Date.parse(e.stageTimestamp), write: `${e.verb} ${resourceOf(e)} ${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''}` }));
}

const permissiveCrd = join(localDir, 'permissive-crd-bad-input.yaml');

beforeAll(async () => {
  await installOperator(http);
  await setOperatorMode(http, 'standalone');
  // A namespace left terminating by an earlier run would refuse our pods: let it go first.
  await waitFor(
    `namespace ${NS} from an earlier run to be gone`,
    180_000,
    () =>
      http.get<{ metadata?: { deletionTimestamp?: string } }>(`/api/v1/namespaces/${NS}`).then(
        (n) => !n.metadata?.deletionTimestamp,
        () => true,
      ),
    1_000,
  );
  await apply(`/api/v1/namespaces/${NS}`, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  await grantDriverNamespace(http, NS);
  await waitFor(`default service account in ${NS}`, 30_000, () =>
    http.get(`/api/v1/namespaces/${NS}/serviceaccounts/default`).then(
      () => true,
      () => false,
    ),
  );
  // The CRD loosened as an older or hand-edited one could be: enums and patterns gone, types kept.
  const crd = parse(readFileSync(CRD_FILE, 'utf8')) as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: { properties: Record<string, Record<string, unknown>> } } } } }[] };
  };
  for (const field of Object.values(crd.spec.versions[0]?.schema.openAPIV3Schema.properties.spec.properties ?? {})) {
    delete field.enum;
    delete field.pattern;
  }
  writeFileSync(permissiveCrd, stringify(crd));
  await kubectl('apply', '-f', permissiveCrd);
  await waitFor(
    'the loosened CRD to accept a bad value',
    30_000,
    async () => {
      try {
        await http.request('POST', CR_API, {
          body: { apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', metadata: { name: 'probe.csi.test' }, spec: { logLevel: 'Probe' } },
          query: { dryRun: 'All' },
        });
        return true;
      } catch {
        return false;
      }
    },
    500,
  );
  // The workloads' driver (Debug) with one running pod to anchor the Lease cases, and two pods named "twin".
  await cr(WL_DRIVER, { logLevel: 'Debug', managementState: 'Managed' }).catch((err: unknown) => {
    if (!(err instanceof KubeApiError && err.status === 409)) throw err;
  });
  await deployment('anchor', WL_DRIVER, [sleeper(['--v=4'])], { replicas: 1 });
  await deployment('twins', WL_DRIVER, [sleeper(['--v=4'])], { replicas: 2, hostname: 'twin' });
  await waitFor(
    'anchor and twins running',
    120_000,
    async () => {
      const pods = (await http.get<{ items: V1Pod[] }>(`/api/v1/namespaces/${NS}/pods`)).items;
      return pods.filter((p) => p.status?.phase === 'Running').length >= 3;
    },
    500,
  );
  await waitFor(`${WL_DRIVER} settled`, 60_000, condition(WL_DRIVER, 'Progressing', 'False', 'AsExpected'), 500);
}, 600_000);

afterAll(async () => {
  await kubectl('apply', '-f', CRD_FILE).catch(() => undefined);
  await remove(`${CR_API}/${WL_DRIVER}`);
  await kubectl('delete', 'namespace', NS, '--wait=false', '--ignore-not-found').catch(() => undefined);
});

it(`${CASES.length} bad inputs: each answered clearly, none makes the operator write to a workload, pod or Lease`, async () => {
  const results: { group: string; input: string; answer: string; from: number; writes: string[] }[] = [];
  const start = Date.now();
  for (const c of CASES) {
    const from = Date.now();
    const since = new Date(from - 1_000);
    let answer: string | undefined;
    try {
      await c.act();
      if (c.refused) answer = `accepted, but the API server should have refused it (${c.refused})`;
    } catch (err) {
      if (!(c.refused && err instanceof KubeApiError && c.refused.test(err.message))) throw err;
      answer = `refused by the API server: ${err.message}`;
    }
    try {
      if (c.signal) answer = await waitFor(`an answer to "${c.input}"`, 60_000, () => c.signal?.(since), 500).catch(() => `no answer within 60 s`);
      results.push({ group: c.group, input: c.input, answer: answer ?? '', from, writes: [] });
    } finally {
      await c.undo?.();
    }
  }
  // Each input's writes are those from its start to the next input's: a write that came after its input was answered
  // and undone is still caught, under a later input. The last input gets a second more, as every other got at least
  // the next input's run.
  await new Promise((r) => setTimeout(r, 1_000));
  const writes = forbiddenWrites(start - 1_000);
  results.forEach((r, i) => {
    const from = i === 0 ? start - 1_000 : r.from;
    const until = results[i + 1]?.from ?? Infinity;
    r.writes = writes.filter((w) => w.at >= from && w.at < until).map((w) => w.write);
  });
  const table = results.map(
    (r) => `${r.group.padEnd(16)} ${r.input.padEnd(70)} ${r.writes.length ? `WROTE ${r.writes.join(', ')}` : 'wrote nothing'} | ${r.answer.slice(0, 160)}`,
  );
  console.log(`bad-input matrix: ${results.length} inputs\n${table.join('\n')}`);
  expect(results.filter((r) => r.answer.startsWith('no answer') || r.answer.startsWith('accepted')).map((r) => `${r.input}: ${r.answer}`)).toEqual([]);
  expect(results.filter((r) => r.writes.length > 0).map((r) => `${r.input}: ${r.writes.join(', ')}`)).toEqual([]);
  expect(results.length).toBeGreaterThanOrEqual(30);
  // The audit log is read and attributed: the operator's own status writes on these CRs are in it.
  expect(operatorAudit(start).some((e) => e.verb === 'patch' && resourceOf(e) === 'operator.openshift.io/clustercsidrivers/status')).toBe(true);
});
