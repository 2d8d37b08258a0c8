import type { V1Container } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { leaseNamespacesOf } from '../../src/handover/lease-namespaces.js';

const c = (args: string[], env: V1Container['env'] = []): V1Container => ({ name: 'c', args, env });
const POD_NS = { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } };

describe('leaseNamespacesOf', () => {
  it.each<[string, V1Container[], string[]]>([
    ['no flag: the pod’s namespace', [c(['--v=2'])], ['drv']],
    ['--flag=value', [c(['--leader-election-namespace=leases'])], ['drv', 'leases']],
    ['--flag value', [c(['--leader-election-namespace', 'leases'])], ['drv', 'leases']],
    ['single dash, Go flag style', [c(['-leader-election-namespace=leases'])], ['drv', 'leases']],
    ['client-go components’ spelling', [c(['--leader-elect-resource-namespace=kube-system'])], ['drv', 'kube-system']],
    ['$(POD_NAMESPACE) from the downward API is the pod’s namespace', [c(['--leader-election-namespace=$(POD_NAMESPACE)'], [POD_NS])], ['drv']],
    ['$(VAR) from a literal env value', [c(['--leader-election-namespace=$(LE_NS)'], [{ name: 'LE_NS', value: 'leases' }])], ['drv', 'leases']],
    [
      '$(VAR) we cannot expand (a ConfigMap) names nothing',
      [c(['--leader-election-namespace=$(LE_NS)'], [{ name: 'LE_NS', valueFrom: { configMapKeyRef: { name: 'x', key: 'y' } } }])],
      ['drv'],
    ],
    ['the last occurrence wins', [c(['--leader-election-namespace=a', '--leader-election-namespace=b'])], ['drv', 'b']],
    ['each container its own', [c(['--leader-election-namespace=a']), c(['--leader-election-namespace=b']), c([])], ['drv', 'a', 'b']],
    ['a flag that merely starts alike is another flag', [c(['--leader-election-namespaces=x'])], ['drv']],
  ])('%s', (_n, containers, want) => expect(leaseNamespacesOf({ containers }, 'drv')).toEqual(want));
});
