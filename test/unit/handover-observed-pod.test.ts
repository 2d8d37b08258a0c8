import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { gracefulDeletionSeconds, type ObservedPod, observePod, observePodGone, podRef } from '../../src/handover/observed-pod.js';
import { provenDead } from '../../src/handover/proven-dead.js';

interface Shape {
  uid?: string;
  /** deletionGracePeriodSeconds; absent: not being deleted. */
  grace?: number;
  terminated?: boolean;
}

const pod = (s: Shape = {}): V1Pod => ({
  metadata: {
    name: 'ctrl-abc',
    namespace: 'csi',
    uid: s.uid ?? 'u1',
    ...(s.grace !== undefined ? { deletionTimestamp: new Date(0), deletionGracePeriodSeconds: s.grace } : {}),
  },
  spec: { nodeName: 'n1', containers: [{ name: 'csi-provisioner' }] },
  status: {
    phase: 'Running',
    containerStatuses: [
      {
        name: 'csi-provisioner',
        image: 'img',
        imageID: '',
        ready: !s.terminated,
        restartCount: 0,
        state: s.terminated ? { terminated: { exitCode: 0 } } : { running: {} },
      },
    ],
  },
});
const seen = (s: Shape): ObservedPod => observePod(undefined, pod(s));

describe('observePod remembers a graceful deletion', () => {
  it.each<[string, ObservedPod | undefined, V1Pod, number | undefined]>([
    ['first sight, not being deleted', undefined, pod(), undefined],
    ['a graceful deletion', seen({}), pod({ grace: 30 }), 30],
    ['the kubelet’s final delete rewrites the grace period to 0', seen({ grace: 30, terminated: true }), pod({ grace: 0, terminated: true }), 30],
    ['a graceful deletion shortened to 10s', seen({ grace: 30 }), pod({ grace: 10 }), 10],
    ['a force deletion, nothing graceful before', seen({}), pod({ grace: 0 }), undefined],
    ['a re-created pod of the same name is another pod', seen({ uid: 'old', grace: 30 }), pod({ uid: 'new' }), undefined],
  ])('%s', (_case, previous, incoming, want) => {
    const observed = observePod(previous, incoming);
    expect(observed).toMatchObject({ pod: incoming, gone: false });
    expect(observed.gracefulDeletionSeconds).toBe(want);
  });

  it('keeps it in the tombstone, with the time the deletion was seen', () => {
    const tombstone = observePodGone(seen({ grace: 30, terminated: true }), pod({ grace: 0, terminated: true }), 5_000);
    expect(tombstone).toMatchObject({ gone: true, goneAt: 5_000, gracefulDeletionSeconds: 30 });
  });
});

describe('gracefulDeletionSeconds', () => {
  it.each<[string, ObservedPod, number | undefined]>([
    ['graceful in the last state', seen({ grace: 30 }), 30],
    ['graceful remembered, grace 0 in the last state', { pod: pod({ grace: 0 }), gone: true, gracefulDeletionSeconds: 30 }, 30],
    ['grace 0 only', seen({ grace: 0 }), undefined],
    ['not being deleted', { pod: pod(), gone: false, gracefulDeletionSeconds: 30 }, undefined],
  ])('%s', (_case, observed, want) => {
    expect(gracefulDeletionSeconds(observed)).toBe(want);
  });
});

describe('a tombstone built from the watch events kube-apiserver sends', () => {
  const ready = new Map<string, V1Node>([['n1', { metadata: { name: 'n1' }, status: { conditions: [{ type: 'Ready', status: 'True' }] } }]]);
  // The event sequences as observed on kube-apiserver 1.36: a kubelet-style final delete (grace 0 with a uid
  // precondition) first persists deletionGracePeriodSeconds 0, then deletes.
  it.each<[string, Shape[], string]>([
    [
      'graceful deletion: delete, containers stop, the kubelet deletes with grace 0',
      [{}, { grace: 30 }, { grace: 30, terminated: true }, { grace: 0, terminated: true }],
      'dead deleted-after-containers-terminated',
    ],
    ['force deletion of a running pod', [{}, { grace: 0 }], 'alive force-deleted'],
    ['force deletion during a graceful one, containers still running', [{}, { grace: 30 }, { grace: 0 }], 'alive force-deleted'],
  ])('%s', (_case, events, want) => {
    let observed: ObservedPod | undefined;
    for (const e of events) observed = observePod(observed, pod(e));
    const last = events.at(-1);
    if (!last) throw new Error('a sequence needs events');
    const tombstone = observePodGone(observed, pod(last), 10_000); // DELETED carries the last state
    const v = provenDead(tombstone, ready);
    expect(v.dead ? `dead ${v.evidence}` : `alive ${v.reason}`).toBe(want);
  });
});

describe('podRef', () => {
  it('is namespace/name', () => expect(podRef(pod())).toBe('csi/ctrl-abc'));
});
