import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { binaryFor, containerArgv, containerEnv, expandVars, repositoryOf } from '../../hack/node-agent/container-spec.js';

describe('repositoryOf', () => {
  it.each([
    ['registry.k8s.io/sig-storage/csi-attacher:v4.12.0', 'registry.k8s.io/sig-storage/csi-attacher'],
    ['registry.k8s.io/sig-storage/csi-attacher', 'registry.k8s.io/sig-storage/csi-attacher'],
    ['localhost:5000/csi-attacher:v1', 'localhost:5000/csi-attacher'],
    ['localhost:5000/csi-attacher', 'localhost:5000/csi-attacher'],
    ['quay.io/x/y@sha256:abcd', 'quay.io/x/y'],
    ['quay.io/x/y:v1@sha256:abcd', 'quay.io/x/y'],
  ])('%s → %s', (image, repo) => expect(repositoryOf(image)).toBe(repo));
});

describe('binaryFor', () => {
  const map = { images: { 'registry.k8s.io/sig-storage/csi-attacher': 'csi-attacher', 'x/y:special': 'special' } };
  it('maps any tag of a repository', () => expect(binaryFor('registry.k8s.io/sig-storage/csi-attacher:v9', map)).toBe('csi-attacher'));
  it('prefers an exact image match', () => expect(binaryFor('x/y:special', map)).toBe('special'));
  it('returns undefined for an unknown image', () => expect(binaryFor('x/y:other', map)).toBeUndefined());
  it('returns undefined for a missing image', () => expect(binaryFor(undefined, map)).toBeUndefined());
});

describe('expandVars', () => {
  const vars = new Map([['ADDRESS', '/csi/csi.sock'], ['NS', 'kube-system']]);
  it.each([
    ['--csi-address=$(ADDRESS)', '--csi-address=/csi/csi.sock'],
    ['$(NS)/$(ADDRESS)', 'kube-system//csi/csi.sock'],
    ['$(UNDEFINED)', '$(UNDEFINED)'],
    ['$$(ADDRESS)', '$(ADDRESS)'],
    ['$(ADDRESS', '$(ADDRESS'],
    ['plain', 'plain'],
    ['cost $5', 'cost $5'],
  ])('%s → %s', (input, out) => expect(expandVars(input, vars)).toBe(out));
});

describe('containerEnv and containerArgv', () => {
  const pod: V1Pod = {
    metadata: { name: 'ctrl-abc', namespace: 'csi', uid: 'u1', labels: { app: 'ctrl' } },
    spec: { nodeName: 'node-1', serviceAccountName: 'sa', containers: [] },
  };
  const facts = { hostIP: '127.0.0.1', podIP: '127.0.0.1', kubernetesServiceHost: '127.0.0.1', kubernetesServicePort: '16443', hostname: 'ctrl-abc' };
  const container: V1Container = {
    name: 'csi-attacher',
    args: ['--csi-address=$(ADDRESS)', '--leader-election-namespace=$(POD_NAMESPACE)', '--v=2'],
    env: [
      { name: 'ADDRESS', value: '/csi/csi.sock' },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      { name: 'NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'APP', valueFrom: { fieldRef: { fieldPath: "metadata.labels['app']" } } },
      { name: 'SOCK_DIR', value: '$(ADDRESS).d' },
    ],
  };
  it('resolves values, field references and earlier variables', () => {
    const env = containerEnv(pod, container, facts);
    expect(env.get('POD_NAMESPACE')).toBe('csi');
    expect(env.get('NODE')).toBe('node-1');
    expect(env.get('APP')).toBe('ctrl');
    expect(env.get('SOCK_DIR')).toBe('/csi/csi.sock.d');
    expect(env.get('KUBERNETES_SERVICE_PORT')).toBe('16443');
    expect(env.get('HOSTNAME')).toBe('ctrl-abc');
  });
  it('expands args and drops command[0], which the image mapping replaces', () => {
    const env = containerEnv(pod, container, facts);
    expect(containerArgv({ ...container, command: ['/csi-attacher', '--x'] }, env)).toEqual([
      '--x', '--csi-address=/csi/csi.sock', '--leader-election-namespace=csi', '--v=2',
    ]);
  });
  it('rejects env sources it cannot honour instead of starting with a wrong value', () => {
    const bad: V1Container = { name: 'c', env: [{ name: 'X', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] };
    expect(() => containerEnv(pod, bad, facts)).toThrow(/only value and fieldRef/);
    const badField: V1Container = { name: 'c', env: [{ name: 'X', valueFrom: { fieldRef: { fieldPath: 'status.phase' } } }] };
    expect(() => containerEnv(pod, badField, facts)).toThrow(/unsupported fieldRef status.phase/);
  });
});
