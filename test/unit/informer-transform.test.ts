import { describe, expect, it } from 'vitest';
import { INFORMER_BACKOFF, retryDelay, withoutManagedFields } from '../../src/kube/informer.js';

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

describe('retryDelay (an informer after failed lists or watches)', () => {
  it('doubles from 200 ms and stays within 5–7.5 s however long the API server is away', () => {
    expect([0, 1, 2, 3, 4].map((n) => retryDelay(n, INFORMER_BACKOFF, 0))).toEqual([200, 400, 800, 1600, 3200]);
    expect(retryDelay(5, INFORMER_BACKOFF, 0)).toBe(5_000);
    expect(retryDelay(1000, INFORMER_BACKOFF, 0.999)).toBeLessThanOrEqual(7_500);
    expect(retryDelay(1000, INFORMER_BACKOFF, 0)).toBe(5_000);
  });
  it('spreads informers that failed together over half their delay again', () => {
    expect(retryDelay(3, INFORMER_BACKOFF, 0.5)).toBe(2_000);
  });
});
