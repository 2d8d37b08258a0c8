import type { V1Lease, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { holderHostname } from '../../src/handover/holder.js';
import { LeaseHolderIndex } from '../../src/handover/lease-holder-index.js';
import { type ObservedPod, observePod, observePodGone } from '../../src/handover/observed-pod.js';
import { ObservedPods } from '../../src/handover/observed-pods.js';

const lease = (ns: string, name: string, holderIdentity?: unknown): V1Lease => ({ metadata: { namespace: ns, name }, spec: { holderIdentity } }) as V1Lease;
const pod = (ns: string, name: string, node?: string): V1Pod => ({
  metadata: { namespace: ns, name, uid: `uid-${ns}-${name}` },
  spec: { nodeName: node, containers: [] },
});
const names = (pods: ObservedPod[]) => pods.map((o) => `${o.pod.metadata?.name}${o.gone ? ' (gone)' : ''}`);

describe('holderHostname', () => {
  it.each([
    ['a pod name', 'ctrl-abc', 'ctrl-abc'],
    ['client-go <pod>_<suffix>', 'ctrl-abc_8c1f0a52', 'ctrl-abc'],
    ['only the first _ ends the hostname', 'ctrl_a_b', 'ctrl'],
    ['a suffix without a hostname', '_8c1f', ''],
    ['nobody', '', ''],
  ])('%s', (_case, holder, want) => {
    expect(holderHostname(holder)).toBe(want);
  });
});

describe('LeaseHolderIndex', () => {
  it('finds the leases a hostname holds, plain or with a suffix, in that namespace only', () => {
    const idx = new LeaseHolderIndex();
    idx.set(lease('a', 'provisioner', 'ctrl-1'));
    idx.set(lease('a', 'attacher', 'ctrl-1_8c1f'));
    idx.set(lease('a', 'resizer', 'ctrl-10'));
    idx.set(lease('b', 'provisioner', 'ctrl-1'));
    expect(idx.heldBy('a', 'ctrl-1')).toEqual(['provisioner', 'attacher']);
    expect(idx.heldBy('a', 'ctrl-10')).toEqual(['resizer']);
    expect(idx.heldBy('b', 'ctrl-1')).toEqual(['provisioner']);
    expect(idx.heldBy('a', 'ctrl')).toEqual([]);
    expect(idx.heldBy('c', 'ctrl-1')).toEqual([]);
  });

  it('follows a lease from holder to holder, through a release', () => {
    const idx = new LeaseHolderIndex();
    idx.set(lease('a', 'l', 'old'));
    idx.set(lease('a', 'l', ''));
    expect(idx.heldBy('a', 'old')).toEqual([]);
    expect(idx.inNamespace('a')).toEqual(['l']);
    idx.set(lease('a', 'l', 'new_x'));
    expect(idx.heldBy('a', 'new')).toEqual(['l']);
    idx.set(lease('a', 'l', 'new_y')); // renewed by a restarted client-go process of the same pod
    expect(idx.heldBy('a', 'new')).toEqual(['l']);
  });

  it('forgets deleted leases; a malformed holder names nobody', () => {
    const idx = new LeaseHolderIndex();
    idx.set(lease('a', 'l1', 'p'));
    idx.set(lease('a', 'l2', 42));
    idx.set(lease('a', 'l3'));
    expect(idx.inNamespace('a')).toEqual(['l1', 'l2', 'l3']);
    idx.delete(lease('a', 'l1', 'p'));
    idx.delete(lease('a', 'never-seen', 'p'));
    expect(idx.heldBy('a', 'p')).toEqual([]);
    expect(idx.inNamespace('a')).toEqual(['l2', 'l3']);
    expect(idx.heldBy('a', '')).toEqual([]);
  });
});

describe('ObservedPods', () => {
  it('looks pods up by namespace and by node, tombstones included, in the order first seen', () => {
    const pods = new ObservedPods();
    const add = (p: V1Pod) => pods.set(p.metadata?.uid ?? '', observePod(pods.get(p.metadata?.uid ?? ''), p));
    add(pod('a', 'p1', 'n1'));
    add(pod('a', 'p2'));
    add(pod('b', 'p3', 'n1'));
    add(pod('a', 'p2', 'n2')); // bound
    add(pod('a', 'p1', 'n1')); // an update keeps its place
    const p3 = pod('b', 'p3', 'n1');
    pods.set('uid-b-p3', observePodGone(pods.get('uid-b-p3'), p3, 1_000));
    expect(names(pods.inNamespace('a'))).toEqual(['p1', 'p2']);
    expect(names(pods.inNamespace('b'))).toEqual(['p3 (gone)']);
    expect(names(pods.onNode('n1'))).toEqual(['p1', 'p3 (gone)']);
    expect(names(pods.onNode('n2'))).toEqual(['p2']);
    expect(pods.onNode(undefined)).toEqual([]);
    expect(pods.inNamespace('c')).toEqual([]);
  });

  it('drops tombstones recorded before the cutoff, and only those', () => {
    const pods = new ObservedPods();
    for (const [name, goneAt] of [
      ['old', 1_000],
      ['newer', 2_000],
    ] as const) {
      const p = pod('a', name, 'n1');
      pods.set(`uid-a-${name}`, observePodGone(undefined, p, goneAt));
    }
    pods.set('uid-a-live', observePod(undefined, pod('a', 'live', 'n1')));
    pods.dropGoneBefore(2_000);
    expect(names(pods.inNamespace('a'))).toEqual(['newer (gone)', 'live']);
    expect(names(pods.onNode('n1'))).toEqual(['newer (gone)', 'live']);
    expect(pods.get('uid-a-old')).toBeUndefined();
    pods.dropGoneBefore(10_000);
    expect(names(pods.inNamespace('a'))).toEqual(['live']);
    expect(pods.size).toBe(1);
  });

  it('a tombstone seen gone again is kept from its latest sighting', () => {
    const pods = new ObservedPods();
    const p = pod('a', 'p', 'n1');
    pods.set('u', observePodGone(undefined, p, 1_000));
    pods.set('v', observePodGone(undefined, pod('a', 'q', 'n1'), 1_500));
    pods.set('u', observePodGone(pods.get('u'), p, 3_000)); // a relist delivered the deletion again
    pods.dropGoneBefore(2_000);
    expect(names(pods.inNamespace('a'))).toEqual(['p (gone)']);
  });
});
