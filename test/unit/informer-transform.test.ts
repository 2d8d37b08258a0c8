import { describe, expect, it } from 'vitest';
import { withoutManagedFields } from '../../src/kube/informer.js';

describe('withoutManagedFields', () => {
  it('drops managedFields and keeps everything else', () => {
    const pod = { metadata: { name: 'p', labels: { a: 'b' }, managedFields: [{ manager: 'kubelet', operation: 'Update' }] }, spec: { nodeName: 'n' } };
    expect(withoutManagedFields(pod)).toStrictEqual({ metadata: { name: 'p', labels: { a: 'b' }, managedFields: undefined }, spec: { nodeName: 'n' } });
  });
  it('leaves an object without them as it is', () => {
    const lease = { metadata: { name: 'l' }, spec: { holderIdentity: 'x' } };
    expect(withoutManagedFields(lease)).toEqual({ metadata: { name: 'l' }, spec: { holderIdentity: 'x' } });
  });
});
