// Our ClusterCSIDriver CRD against OpenShift's own (../shared/third_party/openshift-api-2a3d739, feature set
// Default), judged by the real API server: both are installed under groups of their own (the real
// clustercsidrivers.operator.openshift.io, which other tests use, is left alone) and fed the same objects. Each
// must be accepted or refused alike and, when accepted, come back with the same defaulted spec or status. Creates
// are server-side dry runs; the rules on oldSelf need a stored object, so those items are created for real, their
// last write dry-run, then deleted. The only difference allowed is DISCLOSED, and it must occur.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse } from 'yaml';
import { isNotFound, KubeApiError } from '../../src/kube/errors.js';
import { clusterHttp, repoRoot, waitFor } from '../../hack/lib/cluster.js';
import { thirdPartyDir } from '../../hack/lib/third-party.js';

type Obj = Record<string, unknown>;
interface Crd {
  metadata: { name: string; annotations?: Record<string, string> };
  spec: { group: string; versions: { additionalPrinterColumns?: unknown; schema: { openAPIV3Schema: Obj & { properties: Record<string, Obj> } } }[] };
}

const http = clusterHttp();
const CRD_API = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions';
const ours = parse(readFileSync(join(repoRoot, 'crds', 'operator.openshift.io_clustercsidrivers.yaml'), 'utf8')) as Crd;
const openshift = parse(readFileSync(join(thirdPartyDir('openshift-api-2a3d739'), '0000_50_csi-driver_01_clustercsidrivers-Default.crd.yaml'), 'utf8')) as Crd;
const GROUPS = { ours: 'ours.parity.csi-handover.io', openshift: 'openshift.parity.csi-handover.io' } as const;
type Side = keyof typeof GROUPS;
const crdName = (side: Side) => `clustercsidrivers.${GROUPS[side]}`;
const api = (side: Side) => `/apis/${GROUPS[side]}/v1/clustercsidrivers`;

/** The CRD moved to its own group; the annotations that steer OpenShift's release tooling go. */
function regrouped(crd: Crd, group: string): Crd {
  const c = structuredClone(crd);
  c.spec.group = group;
  c.metadata = { name: `clustercsidrivers.${group}` };
  return c;
}

/** Each CEL rule of OpenShift's CRD, by its message. */
const RULE = {
  kmsKeyARN: 'kmsKeyARN must be a valid AWS KMS key ARN in the format: arn:<partition>:kms:<region>:<account-id>:(key|alias)/<key-id-or-alias>',
  custom: "custom must be set when type is 'Custom', and must not be set otherwise",
  managed: "managed must be set when type is 'Managed', and must not be set otherwise",
  ibmcloud: "ibmcloud must be set if driverType is 'IBMCloud', but remain unset otherwise",
  secretsStore: "secretsStore must be set if driverType is 'SecretsStore', but remain unset otherwise",
  revision: 'must only increase',
  ssName: "driverType 'SecretsStore' requires metadata.name 'secrets-store.csi.k8s.io'",
  ssType: "metadata.name 'secrets-store.csi.k8s.io' requires driverType 'SecretsStore'",
  tokenType: 'tokenRequests type cannot be changed from Managed',
} as const;
type Rule = keyof typeof RULE;

/** A later write: the spec (PUT) or the status (PUT on /status). */
type Write = { spec: Obj } | { status: Obj };
interface Item {
  what: string;
  name: string;
  /** the object created; no spec when absent */
  spec?: Obj;
  /** writes after the create: all made for real but the last, which the item is judged by */
  then?: Write[];
  /** OpenShift's refusal holds this text; absent: OpenShift accepts */
  refusedBy?: string;
  /** the rules whose accepting side this item exercises */
  passes?: Rule[];
  /** OpenShift's answer (its spec, or status after a status write), when worth pinning: the defaults */
  returns?: Obj;
}

const SHARED = 'csi.sharedresource.openshift.io';
const AWS = 'ebs.csi.aws.com';
const EFS = 'efs.csi.aws.com';
const AZURE = 'disk.csi.azure.com';
const GCP = 'pd.csi.storage.gke.io';
const IBM = 'vpc.block.csi.ibm.io';
const VSPHERE = 'csi.vsphere.vmware.com';
const SS = 'secrets-store.csi.k8s.io';
/** An item OpenShift accepts, and one it refuses with `refusedBy` in its answer. */
const ok = (name: string, what: string, spec: Obj | undefined, more: Partial<Item> = {}): Item => ({ what, name, spec, ...more });
const no = (name: string, what: string, spec: Obj | undefined, refusedBy: string, more: Partial<Item> = {}): Item => ({ what, name, spec, refusedBy, ...more });

const NORMAL = { logLevel: 'Normal', operatorLogLevel: 'Normal' };
const driver = (driverType: string, config: Obj = {}) => ({ driverConfig: { driverType, ...config } });
const efs = (efsVolumeMetrics: Obj, extra: Obj = {}) => driver('AWS', { aws: { efsVolumeMetrics, ...extra } });
const azure = (diskEncryptionSet: Obj) => driver('Azure', { azure: { diskEncryptionSet } });
const gcp = (kmsKey: Obj) => driver('GCP', { gcp: { kmsKey } });
const vSphere = (vSphere: Obj) => driver('vSphere', { vSphere });
const store = (secretsStore: Obj) => driver('SecretsStore', { secretsStore });
const rotation = (secretRotation: Obj) => store({ secretRotation });
const tokens = (tokenRequests: Obj) => store({ tokenRequests });
const audiences = (...list: Obj[]) => tokens({ type: 'Managed', managed: { audiences: list } });
const MANAGED = { type: 'Managed', managed: { audiences: [{ audience: 'sts.amazonaws.com', expirationSeconds: 3600 }] } };
const ARN = 'arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab';
const WALK = { state: 'RecursiveWalk', recursiveWalk: { fsRateLimit: 5, refreshPeriodMinutes: 240 } };
const DES = { name: 'des_1', resourceGroup: 'rg(1).x-y', subscriptionID: 'f2007bbf-f802-4a47-9336-cf7c6b89b378' };
const KMS = { keyRing: 'ring-1', name: 'key_1', projectID: 'proj-123', location: 'global' };
const UUID = '0a1b2c3d-4e5f-6789-abcd-ef0123456789';
const CRN = `crn:v1:bluemix:public:kms:us-south:a/${'0123456789abcdef'.repeat(2)}:${UUID}:key:${UUID}`;
const cond = (type: string, status = 'True') => ({ type, status, lastTransitionTime: '2024-01-01T00:00:00Z', reason: 'AsExpected', message: 'ok' });
const status = (...writes: Obj[]): Partial<Item> => ({ then: writes.map((s) => ({ status: s })) });
const FULL_STATUS = {
  conditions: [cond('CSIHandoverProgressing', 'False'), cond('CSIHandoverAvailable')],
  generations: [{ group: 'apps', resource: 'deployments', namespace: 'ns', name: 'd', lastGeneration: 3 }],
  observedGeneration: 1,
  readyReplicas: 2,
  version: '4.20.0',
  latestAvailableRevision: 1,
};

const CORPUS: Item[] = [
  // The top-level fields, their enums, pattern and defaults.
  ok(SHARED, 'an empty spec: both log levels defaulted', {}, { returns: NORMAL }),
  no(SHARED, 'no spec at all', undefined, 'spec: Required value'),
  ok(SHARED, 'logLevel Debug: operatorLogLevel defaulted', { logLevel: 'Debug' }, { returns: { ...NORMAL, logLevel: 'Debug' } }),
  ok(SHARED, 'logLevel "" kept as given', { logLevel: '' }, { returns: { ...NORMAL, logLevel: '' } }),
  ok(SHARED, 'logLevel TraceAll, operatorLogLevel Trace', { logLevel: 'TraceAll', operatorLogLevel: 'Trace' }),
  no(SHARED, 'logLevel "Chatty"', { logLevel: 'Chatty' }, 'spec.logLevel: Unsupported value'),
  no(SHARED, 'logLevel "debug" (wrong case)', { logLevel: 'debug' }, 'spec.logLevel: Unsupported value'),
  no(SHARED, 'logLevel 42 (not a string)', { logLevel: 42 }, 'spec.logLevel: Invalid value'),
  no(SHARED, 'operatorLogLevel "Loud"', { operatorLogLevel: 'Loud' }, 'spec.operatorLogLevel: Unsupported value'),
  ok(SHARED, 'managementState Force', { managementState: 'Force' }),
  ok(SHARED, 'managementState Removed', { managementState: 'Removed' }),
  no(SHARED, 'managementState "Sometimes"', { managementState: 'Sometimes' }, 'spec.managementState: Invalid value'),
  no(SHARED, 'managementState ""', { managementState: '' }, 'spec.managementState: Invalid value'),
  ok(SHARED, 'storageClassState Unmanaged', { storageClassState: 'Unmanaged' }),
  ok(SHARED, 'storageClassState ""', { storageClassState: '' }),
  no(SHARED, 'storageClassState "Kept"', { storageClassState: 'Kept' }, 'spec.storageClassState: Unsupported value'),
  ok(
    SHARED,
    'unsupportedConfigOverrides kept whole, observedConfig null, an unknown field pruned',
    { unsupportedConfigOverrides: { any: { thing: [1] } }, observedConfig: null, sparkle: true },
    { returns: { ...NORMAL, unsupportedConfigOverrides: { any: { thing: [1] } }, observedConfig: null } },
  ),

  // driverConfig and the per-cloud schemas.
  no(SHARED, 'driverConfig without driverType', { driverConfig: {} }, 'spec.driverConfig.driverType: Required value'),
  ok(SHARED, 'driverType ""', driver(''), { passes: ['ibmcloud', 'secretsStore', 'ssName'] }),
  no(SHARED, 'driverType "Oracle"', driver('Oracle'), 'spec.driverConfig.driverType: Unsupported value'),
  ok(AWS, 'AWS with a KMS key ARN', driver('AWS', { aws: { kmsKeyARN: ARN } }), { passes: ['kmsKeyARN', 'ssType'] }),
  no(AWS, 'AWS KMS key ARN with a short account id', driver('AWS', { aws: { kmsKeyARN: 'arn:aws:kms:us-east-1:1234:key/k' } }), RULE.kmsKeyARN),
  ok(EFS, 'AWS EFS metrics by recursive walk, an unknown aws field pruned', efs(WALK, { extra: 1 }), { returns: { ...NORMAL, ...efs(WALK) } }),
  no(EFS, 'AWS EFS metrics state "Sometimes"', efs({ state: 'Sometimes' }), 'spec.driverConfig.aws.efsVolumeMetrics.state: Unsupported value'),
  no(EFS, 'AWS EFS metrics without state', efs({}), 'state: Required value'),
  no(EFS, 'AWS EFS fsRateLimit 101', efs({ ...WALK, recursiveWalk: { fsRateLimit: 101 } }), 'fsRateLimit: Invalid value'),
  ok(AZURE, 'Azure disk encryption set', azure(DES)),
  no(AZURE, 'Azure subscriptionID not a UUID', azure({ ...DES, subscriptionID: 'not-a-uuid' }), 'subscriptionID: Invalid value'),
  no(AZURE, 'Azure resourceGroup ending in a period', azure({ ...DES, resourceGroup: 'rg.' }), 'resourceGroup: Invalid value'),
  no(AZURE, 'Azure disk encryption set without resourceGroup', azure({ name: 'des', subscriptionID: DES.subscriptionID }), 'resourceGroup: Required value'),
  ok(GCP, 'GCP KMS key', gcp(KMS)),
  no(GCP, 'GCP projectID too short', gcp({ ...KMS, projectID: 'abc' }), 'projectID: Invalid value'),
  no(GCP, 'GCP KMS key without keyRing', gcp({ name: 'k', projectID: 'proj-123' }), 'keyRing: Required value'),
  ok(IBM, 'IBMCloud with its key CRN', driver('IBMCloud', { ibmcloud: { encryptionKeyCRN: CRN } }), { passes: ['ibmcloud'] }),
  no(IBM, 'IBMCloud without ibmcloud', driver('IBMCloud'), RULE.ibmcloud),
  no(AWS, 'AWS with ibmcloud set', driver('AWS', { ibmcloud: { encryptionKeyCRN: CRN } }), RULE.ibmcloud),
  no(
    IBM,
    'IBMCloud key CRN of the wrong form',
    driver('IBMCloud', { ibmcloud: { encryptionKeyCRN: CRN.replace('bluemix', 'redmix') } }),
    'encryptionKeyCRN: Invalid value',
  ),
  ok(
    VSPHERE,
    'vSphere snapshot limits and topology',
    vSphere({ globalMaxSnapshotsPerBlockVolume: 3, granularMaxSnapshotsPerBlockVolumeInVVOL: 32, topologyCategories: ['zone'] }),
  ),
  no(
    VSPHERE,
    'vSphere globalMaxSnapshotsPerBlockVolume 33',
    vSphere({ globalMaxSnapshotsPerBlockVolume: 33 }),
    'globalMaxSnapshotsPerBlockVolume: Invalid value',
  ),
  no(VSPHERE, 'vSphere granularMaxSnapshotsPerBlockVolumeInVSAN 0', vSphere({ granularMaxSnapshotsPerBlockVolumeInVSAN: 0 }), 'InVSAN: Invalid value'),

  // The Secrets Store driver: its config, the rules tying it to its name, and its transition rule.
  ok(SS, 'SecretsStore, rotation off', rotation({ type: 'None' }), { passes: ['custom', 'secretsStore', 'ssName', 'ssType'] }),
  ok(SS, 'SecretsStore, custom rotation', rotation({ type: 'Custom', custom: { minimumRefreshAge: 120 } }), { passes: ['custom'] }),
  no(SS, 'custom rotation without custom', rotation({ type: 'Custom' }), RULE.custom),
  no(SS, 'rotation off with custom', rotation({ type: 'None', custom: { minimumRefreshAge: 120 } }), RULE.custom),
  no(SS, 'custom rotation with custom {}', rotation({ type: 'Custom', custom: {} }), 'custom: Invalid value'),
  no(SS, 'minimumRefreshAge 0', rotation({ type: 'Custom', custom: { minimumRefreshAge: 0 } }), 'minimumRefreshAge: Invalid value'),
  no(SS, 'rotation type "Sometimes"', rotation({ type: 'Sometimes' }), 'spec.driverConfig.secretsStore.secretRotation.type: Unsupported value'),
  no(SS, 'secretsStore {}', store({}), 'spec.driverConfig.secretsStore: Invalid value'),
  ok(SS, 'managed token requests, one audience "" (the API server default)', audiences(...MANAGED.managed.audiences, { audience: '' }), {
    passes: ['managed'],
  }),
  ok(SS, 'managed token requests, no audiences (clears them)', audiences()),
  no(SS, 'managed token requests without managed', tokens({ type: 'Managed' }), RULE.managed),
  no(SS, 'unmanaged token requests with managed', tokens({ ...MANAGED, type: 'Unmanaged' }), RULE.managed),
  no(SS, 'managed {}', tokens({ type: 'Managed', managed: {} }), 'managed: Invalid value'),
  no(SS, 'token requests type "Sometimes"', tokens({ type: 'Sometimes' }), 'spec.driverConfig.secretsStore.tokenRequests.type: Unsupported value'),
  no(SS, 'the same audience twice', audiences({ audience: 'a' }, { audience: 'a' }), 'Duplicate value'),
  no(SS, 'eleven audiences', audiences(...Array.from({ length: 11 }, (_, i) => ({ audience: `a${i}` }))), 'Too many'),
  no(SS, 'expirationSeconds 599', audiences({ audience: 'a', expirationSeconds: 599 }), 'expirationSeconds: Invalid value'),
  no(SS, 'SecretsStore without secretsStore', driver('SecretsStore'), RULE.secretsStore),
  no(AWS, 'AWS with secretsStore set', driver('AWS', { secretsStore: { secretRotation: { type: 'None' } } }), RULE.secretsStore),
  no(AWS, 'SecretsStore under an AWS driver name', rotation({ type: 'None' }), RULE.ssName),
  no(SS, 'the Secrets Store name with driverType AWS', driver('AWS'), RULE.ssType),
  ok(SS, 'the Secrets Store name without driverConfig', { logLevel: 'Debug' }, { passes: ['ssType'] }),
  no(SS, 'token requests Managed → Unmanaged', tokens(MANAGED), RULE.tokenType, { then: [{ spec: tokens({ type: 'Unmanaged' }) }] }),
  no(SS, 'token requests Managed → dropped', tokens(MANAGED), RULE.tokenType, { then: [{ spec: rotation({ type: 'None' }) }] }),
  ok(SS, 'token requests Managed → Managed, another audience', tokens(MANAGED), {
    then: [{ spec: audiences({ audience: 'api://x' }) }],
    passes: ['tokenType'],
  }),
  ok(SS, 'token requests Unmanaged → Managed', tokens({ type: 'Unmanaged' }), { then: [{ spec: tokens(MANAGED) }], passes: ['tokenType'] }),

  // The status an operator writes: OpenShift's fields only.
  ok(
    SHARED,
    'a full status; the former status.handover extension pruned',
    {},
    { ...status({ ...FULL_STATUS, handover: { lastRollout: {} } }), returns: FULL_STATUS },
  ),
  ok(SHARED, 'latestAvailableRevision 5 → 7', {}, { ...status({ latestAvailableRevision: 5 }, { latestAvailableRevision: 7 }), passes: ['revision'] }),
  no(SHARED, 'latestAvailableRevision 5 → 2', {}, RULE.revision, status({ latestAvailableRevision: 5 }, { latestAvailableRevision: 2 })),
  no(SHARED, 'two conditions of one type', {}, 'Duplicate value', status({ conditions: [cond('A'), cond('A', 'False')] })),
  no(SHARED, 'a condition status "Maybe"', {}, 'status: Unsupported value', status({ conditions: [cond('A', 'Maybe')] })),
  no(SHARED, 'a condition without lastTransitionTime', {}, 'lastTransitionTime: Required value', status({ conditions: [{ type: 'A', status: 'True' }] })),

  // The disclosed difference: any driver name here, only OpenShift's own there.
  no('hostpath.csi.k8s.io', 'a driver OpenShift does not ship', { logLevel: 'Debug' }, 'metadata.name: Unsupported value'),
];

/** Where ours may answer otherwise, and why (the CRD's header says the same). */
const DISCLOSED: Record<string, { ours: string; openshift: string; why: string }> = {
  'a driver OpenShift does not ship': { ours: 'accepted', openshift: 'refused', why: 'OpenShift restricts metadata.name to its 16 shipped drivers' },
};

type Outcome = { accepted: true; answer: unknown } | { accepted: false; message: string };

async function feed(side: Side, item: Item): Promise<Outcome> {
  const writes: (Write | { create: Obj | undefined })[] = [{ create: item.spec }, ...(item.then ?? [])];
  const path = `${api(side)}/${item.name}`;
  let stored: Obj = {};
  let answer: unknown;
  try {
    for (const [i, w] of writes.entries()) {
      const query = i === writes.length - 1 ? { dryRun: 'All' } : {};
      if ('create' in w) {
        const body = { apiVersion: `${GROUPS[side]}/v1`, kind: 'ClusterCSIDriver', metadata: { name: item.name }, ...(w.create ? { spec: w.create } : {}) };
        stored = await http.request<Obj>('POST', api(side), { body, query });
        answer = stored.spec;
      } else if ('spec' in w) {
        stored = await http.request<Obj>('PUT', path, { body: { ...stored, spec: w.spec }, query });
        answer = stored.spec;
      } else {
        stored = await http.request<Obj>('PUT', `${path}/status`, { body: { ...stored, status: w.status }, query });
        answer = stored.status;
      }
    }
    return { accepted: true, answer };
  } catch (err) {
    if (err instanceof KubeApiError && err.status === 422) return { accepted: false, message: err.message };
    throw err;
  } finally {
    if (writes.length > 1) await http.request('DELETE', path).catch(() => undefined);
  }
}

async function install(side: Side, crd: Crd): Promise<void> {
  await http.request('DELETE', `${CRD_API}/${crdName(side)}`).catch(() => undefined);
  await waitFor(
    `${crdName(side)} from an earlier run gone`,
    60_000,
    () =>
      http.get(`${CRD_API}/${crdName(side)}`).then(
        () => false,
        (err: unknown) => isNotFound(err),
      ),
    200,
  );
  await http.request('POST', CRD_API, { body: regrouped(crd, GROUPS[side]) });
  await waitFor(`${crdName(side)} Established`, 30_000, async () => {
    const got = await http.get<{ status?: { conditions?: { type: string; status: string }[] } }>(`${CRD_API}/${crdName(side)}`);
    return got.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True') && (await http.get(api(side)).then(() => true));
  });
}

/** Every CEL rule's message and every enum's path in a schema. */
function rulesAndEnums(schema: Obj, path: string, found = { rules: [] as string[], enums: [] as string[] }) {
  for (const v of (schema['x-kubernetes-validations'] as { message: string }[] | undefined) ?? []) found.rules.push(v.message);
  if (schema.enum) found.enums.push(path);
  for (const [k, sub] of Object.entries((schema.properties as Record<string, Obj> | undefined) ?? {})) rulesAndEnums(sub, path ? `${path}.${k}` : k, found);
  if (schema.items) rulesAndEnums(schema.items as Obj, `${path}[]`, found);
  return found;
}

beforeAll(async () => {
  await Promise.all([install('ours', ours), install('openshift', openshift)]);
}, 120_000);

afterAll(async () => {
  for (const side of ['ours', 'openshift'] as const) await http.request('DELETE', `${CRD_API}/${crdName(side)}`).catch(() => undefined);
});

it("differs from OpenShift's CRD file only where its header says: the name enum, the description, annotations, printer columns", () => {
  const disclosedAway = (crd: Crd): Crd => {
    const c = structuredClone(crd);
    delete c.metadata.annotations;
    const v = c.spec.versions[0];
    delete v?.additionalPrinterColumns;
    delete v?.schema.openAPIV3Schema.description;
    delete (v?.schema.openAPIV3Schema.properties.metadata?.properties as Record<string, Obj> | undefined)?.name?.enum;
    return c;
  };
  expect(disclosedAway(ours)).toEqual(disclosedAway(openshift));
});

it(`${CORPUS.length} objects fed to both CRDs: answered alike but for DISCLOSED`, async () => {
  const start = Date.now();
  const results: { item: Item; ours: Outcome; openshift: Outcome }[] = [];
  for (const item of CORPUS) {
    const [o, s] = await Promise.all([feed('ours', item), feed('openshift', item)]);
    results.push({ item, ours: o, openshift: s });
  }
  const seconds = ((Date.now() - start) / 1000).toFixed(1);
  const word = (o: Outcome) => (o.accepted ? 'accepted' : 'refused');
  const alike = (a: Outcome, b: Outcome) => a.accepted === b.accepted && (!a.accepted || (b.accepted && isDeepStrictEqual(a.answer, b.answer)));
  const differences = results.filter((r) => !alike(r.ours, r.openshift));
  console.log(
    `crd-parity: ${results.length} objects in ${seconds} s, ${differences.length} answered differently\n` +
      results
        .map(
          (r) =>
            `${alike(r.ours, r.openshift) ? '  same' : '  DIFF'} ${r.item.what.padEnd(72)} ours ${word(r.ours).padEnd(8)} openshift ${word(r.openshift)}` +
            (DISCLOSED[r.item.what] ? ` (disclosed: ${DISCLOSED[r.item.what]?.why})` : ''),
        )
        .join('\n'),
  );

  // The corpus means what it says: OpenShift answers each item as written, refusing with the rule named.
  const misjudged = results.filter(({ item, openshift: s }) =>
    item.refusedBy
      ? s.accepted || !s.message.includes(item.refusedBy)
      : !s.accepted || (item.returns !== undefined && !isDeepStrictEqual(s.answer, item.returns)),
  );
  expect(misjudged.map((r) => `${r.item.what}: ${r.openshift.accepted ? JSON.stringify(r.openshift.answer) : r.openshift.message}`)).toEqual([]);

  // Every CEL rule of OpenShift's CRD is seen passing and failing; every enum of its spec refuses a value.
  const { rules, enums } = rulesAndEnums(openshift.spec.versions[0]?.schema.openAPIV3Schema ?? {}, '');
  expect([...rules].sort()).toEqual(Object.values(RULE).sort());
  const uncovered = (Object.keys(RULE) as Rule[]).filter(
    (r) => !CORPUS.some((i) => i.refusedBy === RULE[r]) || !CORPUS.some((i) => !i.refusedBy && i.passes?.includes(r)),
  );
  expect(uncovered).toEqual([]);
  const specEnums = enums.filter((e) => e.startsWith('spec.'));
  expect(specEnums.filter((e) => !CORPUS.some((i) => i.refusedBy === `${e}: Unsupported value`))).toEqual([]);
  expect(enums).toContain('metadata.name');

  // No difference outside DISCLOSED, and each disclosed one occurs (an answer shown where both accepted).
  const said = (o: Outcome, other: Outcome) => (o.accepted && other.accepted ? `accepted ${JSON.stringify(o.answer)}` : word(o));
  const described = differences.map((r) => ({ what: r.item.what, ours: said(r.ours, r.openshift), openshift: said(r.openshift, r.ours) }));
  expect(described.filter((d) => !DISCLOSED[d.what])).toEqual([]);
  expect(Object.entries(DISCLOSED).map(([what, d]) => ({ what, ours: d.ours, openshift: d.openshift }))).toEqual(described.filter((d) => DISCLOSED[d.what]));
  expect(results.length).toBeGreaterThanOrEqual(40);
});
