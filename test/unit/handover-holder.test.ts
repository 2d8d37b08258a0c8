import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { type HolderResolution, podHostname, podIdentity, renewingPod, resolveHolder, sanitizeHostname } from '../../src/handover/holder.js';
import type { ObservedPod } from '../../src/handover/observed-pod.js';

interface PodShape {
  node?: string;
  hostNetwork?: boolean;
  hostname?: string;
  hostnameOverride?: string;
  subdomain?: string;
  setHostnameAsFQDN?: boolean;
}

const pod = (name: string, s: PodShape = {}): V1Pod => ({
  metadata: { name, namespace: 'csi', uid: `uid-${name}-${s.node ?? 'n1'}` },
  spec: {
    nodeName: s.node ?? 'n1',
    hostNetwork: s.hostNetwork,
    hostname: s.hostname,
    hostnameOverride: s.hostnameOverride,
    subdomain: s.subdomain,
    setHostnameAsFQDN: s.setHostnameAsFQDN,
    containers: [{ name: 'csi-provisioner' }],
  },
});
const live = (name: string, s?: PodShape): ObservedPod => ({ pod: pod(name, s), gone: false });
// A tombstone of an earlier pod: a different uid from a live pod of the same name.
const gone = (name: string, s?: PodShape): ObservedPod => {
  const p = pod(name, s);
  return { pod: { ...p, metadata: { ...p.metadata, uid: `old-${name}` } }, gone: true, goneAt: 1_000 };
};
const node = (name: string): V1Node => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status: 'True' }] } });
const nodes = new Map(['worker-1.example.com', 'worker-2'].map((n) => [n, node(n)]));

/** One line per outcome, so a row states exactly which pod (live or deleted) and which rule resolved it. */
function summary(r: HolderResolution): string {
  switch (r.kind) {
    case 'none':
      return 'none';
    case 'unresolved':
      return `unresolved ${r.reason}`;
    case 'pod':
      return `${r.pod.gone ? 'deleted ' : ''}${r.pod.pod.metadata?.name ?? '?'} via ${r.via}`;
  }
}

const longName = `${'a'.repeat(60)}-b-cdefgh`; // 69 chars: the kubelet cuts it to 63 and trims the trailing '-'

describe('resolveHolder', () => {
  it.each<[string, string, ObservedPod[], string]>([
    ['pod-name identity', 'ctrl-7d9f-abcde', [live('ctrl-7d9f-abcde'), live('ctrl-7d9f-zzzzz')], 'ctrl-7d9f-abcde via pod-name'],
    [
      'client-go <pod>_<uuid> identity',
      'ctrl-7d9f-abcde_8c1f0a52-6b7e-4c4b-9a0e-1f2d3c4b5a69',
      [live('ctrl-7d9f-abcde'), live('ctrl-7d9f-zzzzz')],
      'ctrl-7d9f-abcde via pod-name-suffix',
    ],
    ['pod name with a dot is compared sanitised', 'csi-ctrl-0', [live('csi.ctrl-0')], 'csi.ctrl-0 via pod-name'],
    ['a deleted holder (tombstone) still resolves', 'ctrl-old', [gone('ctrl-old'), live('ctrl-new')], 'deleted ctrl-old via pod-name'],
    [
      'hostNetwork: node name, exactly one hostNetwork pod on that node',
      'worker-1-example-com',
      [
        live('hn-a', { hostNetwork: true, node: 'worker-1.example.com' }),
        live('hn-b', { hostNetwork: true, node: 'worker-2' }),
        live('plain', { node: 'worker-1.example.com' }),
      ],
      'hn-a via host-network-node',
    ],
    ['hostNetwork: client-go suffix on a node name', 'worker-2_1234', [live('hn-b', { hostNetwork: true, node: 'worker-2' })], 'hn-b via host-network-node'],
    [
      'hostNetwork: two pods on the node',
      'worker-2',
      [live('hn-b', { hostNetwork: true, node: 'worker-2' }), live('hn-c', { hostNetwork: true, node: 'worker-2' })],
      'unresolved ambiguous-host-network',
    ],
    [
      'hostNetwork: a deleted pod and its replacement on the node',
      'worker-2',
      [gone('hn-old', { hostNetwork: true, node: 'worker-2' }), live('hn-new', { hostNetwork: true, node: 'worker-2' })],
      'unresolved ambiguous-host-network',
    ],
    [
      'hostNetwork: no such pod on the node, a plain pod carries the name',
      'worker-2',
      [live('worker-2', { node: 'worker-1.example.com' })],
      'worker-2 via pod-name',
    ],
    [
      'a pod name and a hostNetwork node both match',
      'worker-2',
      [live('worker-2', { node: 'worker-1.example.com' }), live('hn-b', { hostNetwork: true, node: 'worker-2' })],
      'unresolved ambiguous-identity',
    ],
    ['a hostNetwork pod is not known by its own name', 'hn-b', [live('hn-b', { hostNetwork: true, node: 'worker-2' })], 'unresolved unknown-identity'],
    ['tombstone and live pod with the same name (re-created)', 'sts-0', [gone('sts-0'), live('sts-0')], 'unresolved ambiguous-identity'],
    ['two pods sanitise to the same name', 'a-b', [live('a.b'), live('a-b', { node: 'n2' })], 'unresolved ambiguous-identity'],
    ['replicas sharing spec.hostname', 'ctrl', [live('ctrl-1', { hostname: 'ctrl' }), live('ctrl-2', { hostname: 'ctrl' })], 'unresolved ambiguous-identity'],
    ['a long pod name, truncated as the kubelet does', 'a'.repeat(60) + '-b', [live(longName)], `${longName} via pod-name`],
    ['unknown identity', 'somebody-else', [live('ctrl-7d9f-abcde')], 'unresolved unknown-identity'],
    ['a suffix with no hostname before it', '_8c1f0a52', [live('ctrl-7d9f-abcde')], 'unresolved unknown-identity'],
    ['empty holder: nobody holds it', '', [live('ctrl-7d9f-abcde')], 'none'],
  ])('%s', (_case, holder, pods, want) => {
    expect(summary(resolveHolder(holder, pods, nodes))).toBe(want);
  });

  it('names the candidates when it refuses, for the event and the log', () => {
    const r = resolveHolder('sts-0', [gone('sts-0'), live('sts-0')], nodes);
    expect(r).toMatchObject({ kind: 'unresolved', message: expect.stringContaining('csi/sts-0 (deleted), csi/sts-0') });
  });

  it('says when an unknown holder is a node without hostNetwork pods', () => {
    const r = resolveHolder('worker-1-example-com', [live('plain', { node: 'worker-1.example.com' })], nodes);
    expect(r).toMatchObject({ kind: 'unresolved', reason: 'unknown-identity', message: expect.stringContaining('node worker-1.example.com') });
  });
});

describe('sanitizeHostname', () => {
  it.each([
    ['dots and underscores become dashes', 'csi.ctrl_0', 'csi-ctrl-0'],
    ['a valid hostname is unchanged', 'Ctrl-0', 'Ctrl-0'],
    ['a trailing dash gets an X, as csi-lib-utils does', 'node.', 'node-X'],
  ])('%s', (_case, input, want) => {
    expect(sanitizeHostname(input)).toBe(want);
  });
});

describe('podHostname', () => {
  it.each<[string, V1Pod, string | undefined]>([
    ['the pod name', pod('ctrl-0'), 'ctrl-0'],
    ['spec.hostname wins over the name', pod('ctrl-0', { hostname: 'h' }), 'h'],
    ['spec.hostnameOverride wins over everything', pod('ctrl-0', { hostname: 'h', hostnameOverride: 'o.example' }), 'o.example'],
    ['hostNetwork: the node’s, not the pod’s', pod('ctrl-0', { hostNetwork: true }), undefined],
    ['setHostnameAsFQDN with a subdomain: needs the cluster domain', pod('ctrl-0', { setHostnameAsFQDN: true, subdomain: 's' }), undefined],
    ['setHostnameAsFQDN without a subdomain: the short name', pod('ctrl-0', { setHostnameAsFQDN: true }), 'ctrl-0'],
    ['over 63 chars: cut, trailing dash trimmed', pod(longName), 'a'.repeat(60) + '-b'],
  ])('%s', (_case, p, want) => {
    expect(podHostname(p)).toBe(want);
  });
});

describe('podIdentity', () => {
  it.each<[string, V1Pod, string | undefined]>([
    ['its own hostname, sanitised', pod('ctrl-1', { hostname: 'ctrl.1' }), 'ctrl-1'],
    ['hostNetwork: its node’s name, sanitised', pod('ctrl-1', { hostNetwork: true, node: 'worker-1.example.com' }), 'worker-1-example-com'],
    ['hostNetwork, not yet bound: none', { ...pod('ctrl-1', { hostNetwork: true }), spec: { containers: [], hostNetwork: true } }, undefined],
  ])('%s', (_n, p, want) => expect(podIdentity(p)).toBe(want));
});

describe('renewingPod (measurement only)', () => {
  const mayRun = (p: ObservedPod) => !p.gone;
  const hn = { hostNetwork: true, node: 'worker-2' };
  it.each<[string, string, ObservedPod[], string | undefined]>([
    ['the one pod of that name', 'ctrl-1', [live('ctrl-1'), live('ctrl-2')], 'uid-ctrl-1-n1'],
    ['<pod>_<suffix>', 'ctrl-1_4f1c', [live('ctrl-1')], 'uid-ctrl-1-n1'],
    ['a dead holder nobody replaced is still the holder', 'ctrl-1', [gone('ctrl-1')], 'old-ctrl-1'],
    [
      'hostNetwork: the new pod on the old one’s node, once the old one is gone',
      'worker-2',
      [gone('ctrl-old', hn), live('ctrl-new', hn)],
      'uid-ctrl-new-worker-2',
    ],
    ['hostNetwork: two that may run on one node: cannot tell', 'worker-2', [live('ctrl-old', hn), live('ctrl-new', hn)], undefined],
    ['nobody of that identity', 'stranger', [live('ctrl-1')], undefined],
    ['no holder', '', [live('ctrl-1')], undefined],
  ])('%s', (_n, identity, pods, want) => expect(renewingPod(identity, pods, mayRun)?.pod.metadata?.uid).toBe(want));
});
