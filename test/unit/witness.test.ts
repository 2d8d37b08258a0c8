// The node witness's decisions and readers, on cgroup and bundle trees laid out in a temporary directory as the
// kernel and containerd lay them out (the cluster test runs it on real nodes).
import type { V1Pod } from '@kubernetes/client-node';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { tempDirs } from './temp-dirs.js';
import { DELETION_COST, desiredDeletionCost } from '../../src/handover/deletion-cost.js';
import { CONTAINERS_EXITED, evidenceMessage, witnessCondition, witnessedNodes, witnessEvidence } from '../../src/handover/witness-evidence.js';
import type { KubeHttp } from '../../src/kube/http.js';
import { type CgroupLayout, childCgroupOf, detectLayout, kindKey, kubeletRootFromSelf, readPodCgroup } from '../../src/witness/cgroups.js';
import { judge, wantsWitness } from '../../src/witness/judge.js';
import { makeWitnessMetrics } from '../../src/witness/metrics.js';
import { bundleKind, type CgroupKind, kindFromAnnotations } from '../../src/witness/runtime.js';
import { type PodSource, Witness } from '../../src/witness/witness.js';

const UID = '58e6b1b6-66e1-4753-8758-6214d563a2c6';
const SANDBOX = 'aa'.repeat(32);
const C1 = 'c1'.repeat(32);
const C2 = 'c2'.repeat(32);
const T = Date.parse('2026-12-03T11:40:01.123Z');

const tmp = tempDirs('witness-');

/** A cgroup v1 pids hierarchy under `root` with the kubelet's cgroupRoot `/node-1`: tasks per child cgroup. */
function v1Tree(tasks: Record<string, number>, qos = 'besteffort'): string {
  const fs = tmp();
  mkdirSync(join(fs, 'pids'));
  writeFileSync(join(fs, 'pids', 'pids.max'), 'max\n');
  const pod = join(fs, 'pids', 'node-1', 'kubepods', qos, `pod${UID}`);
  for (const [id, n] of Object.entries(tasks)) {
    mkdirSync(join(pod, id), { recursive: true });
    writeFileSync(join(pod, id, 'pids.current'), `${n}\n`);
  }
  mkdirSync(pod, { recursive: true });
  writeFileSync(join(pod, 'pids.current'), '1\n');
  return fs;
}

describe('cgroup readers', () => {
  it('finds the kubelet cgroupRoot in the witness’s own cgroup (v1 pids line; v2 unified line)', () => {
    const v1 = `12:pids:/csi-handover-aa479b-node-1/kubepods/besteffort/pod${UID}/${C1}\n7:blkio:/elsewhere/kubepods/x\n`;
    expect(kubeletRootFromSelf(v1, false)).toBe('/csi-handover-aa479b-node-1');
    expect(kubeletRootFromSelf(`0::/kubepods.slice/kubepods-besteffort.slice/x.scope\n`, true)).toBe('');
    expect(kubeletRootFromSelf('0::/\n', true)).toBe('');
    expect(kubeletRootFromSelf('5:cpu:/node-1/kubepods/x\n', false)).toBe('');
  });

  it('reads pids.current of every container cgroup of the pod (v1), timed by the clock read just before listing them', async () => {
    const fs = v1Tree({ [SANDBOX]: 1, [C1]: 0, [C2]: 3 }, 'burstable');
    const layout = await detectLayout(fs, undefined, `8:pids:/node-1/kubepods/burstable/pod${UID}/${C1}\n`);
    expect(layout).toEqual({ version: 1, base: join(fs, 'pids', 'node-1') });
    let clock = T;
    const r = readPodCgroup(layout, UID, () => clock++);
    // The clock's last reading (one per place looked) is the listing time: nothing read later moves it.
    expect(r.found && r.listedAt).toBe(clock - 1);
    expect(r.found && Object.fromEntries(r.children.map((c) => [kindKey(c), c.tasks]))).toEqual({
      [`workload/${SANDBOX}`]: 1,
      [`workload/${C1}`]: 0,
      [`workload/${C2}`]: 3,
    });
  });

  it('reads cgroup v2’s populated flag under the systemd driver’s names', async () => {
    const fs = tmp();
    writeFileSync(join(fs, 'cgroup.controllers'), 'cpu pids\n');
    const pod = join(fs, 'kubepods.slice', 'kubepods-besteffort.slice', `kubepods-besteffort-pod${UID.replaceAll('-', '_')}.slice`);
    for (const [id, populated] of [
      [`cri-containerd-${SANDBOX}.scope`, 1],
      [`crio-${C1}.scope`, 0],
    ] as const) {
      mkdirSync(join(pod, id), { recursive: true });
      writeFileSync(join(pod, id, 'cgroup.events'), `populated ${populated}\nfrozen 0\n`);
    }
    const layout = await detectLayout(fs, undefined, '0::/\n');
    const r = readPodCgroup(layout, UID, () => T);
    expect(r.found && r.children.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { id: SANDBOX, role: 'workload', tasks: 1 },
      { id: C1, role: 'workload', tasks: 0 },
    ]);
  });

  it('says where it looked when the pod has no cgroup, and refuses a tree with neither v2 nor the v1 pids hierarchy', async () => {
    const fs = v1Tree({});
    const r = readPodCgroup(await detectLayout(fs, '/node-2', ''), 'other-uid', () => T);
    expect(r).toEqual({ found: false, looked: expect.arrayContaining([join(fs, 'pids', 'node-2', 'kubepods', 'podother-uid')]) });
    await expect(detectLayout(tmp(), undefined, '')).rejects.toThrow(/neither cgroup v2/);
  });

  it.each<[string, string, ReturnType<typeof childCgroupOf>]>([
    ['containerd, cgroupfs', C1, { id: C1, role: 'workload' }],
    ['containerd, systemd', `cri-containerd-${C1}.scope`, { id: C1, role: 'workload' }],
    ['CRI-O, cgroupfs', `crio-${C1}`, { id: C1, role: 'workload' }],
    ['CRI-O, systemd', `crio-${C1}.scope`, { id: C1, role: 'workload' }],
    ['CRI-O’s conmon, cgroupfs', `crio-conmon-${C1}`, { id: C1, role: 'monitor' }],
    ['CRI-O’s conmon, systemd', `crio-conmon-${C1}.scope`, { id: C1, role: 'monitor' }],
  ])('names a child cgroup as the runtime does: %s', (_case, name, want) => {
    expect(childCgroupOf(name)).toEqual(want);
  });
});

describe('runtime bundles', () => {
  it.each<[string, Record<string, string>, CgroupKind | undefined]>([
    ['containerd sandbox of this pod', { 'io.kubernetes.cri.container-type': 'sandbox', 'io.kubernetes.cri.sandbox-uid': UID }, 'sandbox'],
    ['containerd container', { 'io.kubernetes.cri.container-type': 'container', 'io.kubernetes.cri.sandbox-id': SANDBOX }, 'container'],
    ['CRI-O sandbox of this pod', { 'io.kubernetes.cri-o.ContainerType': 'sandbox', 'io.kubernetes.pod.uid': UID }, 'sandbox'],
    ['a sandbox that does not say for which pod', { 'io.kubernetes.cri.container-type': 'sandbox' }, undefined],
    ['another pod’s sandbox', { 'io.kubernetes.cri.container-type': 'sandbox', 'io.kubernetes.cri.sandbox-uid': 'x' }, undefined],
    ['no annotations', {}, undefined],
    ['an unknown type', { 'io.kubernetes.cri.container-type': 'vm' }, undefined],
  ])('%s', (_case, annotations, want) => {
    expect(kindFromAnnotations(annotations, UID, 'workload')).toBe(want);
  });

  it('reads config.json from the one bundle template that has one; unreadable or odd ids prove nothing', async () => {
    const run = tmp();
    const containerd = join(run, 'containerd', '{id}');
    mkdirSync(join(run, 'containerd', SANDBOX), { recursive: true });
    writeFileSync(
      join(run, 'containerd', SANDBOX, 'config.json'),
      JSON.stringify({ annotations: { 'io.kubernetes.cri.container-type': 'sandbox', 'io.kubernetes.cri.sandbox-uid': UID } }),
    );
    mkdirSync(join(run, 'containerd', C2), { recursive: true });
    writeFileSync(join(run, 'containerd', C2, 'config.json'), '{not json');
    expect(await bundleKind([join(run, 'crio', '{id}'), containerd], SANDBOX, UID, 'workload')).toBe('sandbox');
    expect(await bundleKind([containerd], C1, UID, 'workload')).toBeUndefined();
    expect(await bundleKind([containerd], C2, UID, 'workload')).toBeUndefined();
    expect(await bundleKind([containerd], '../etc', UID, 'workload')).toBeUndefined();
    // `..` would name the directory above, here a sandbox's bundle.
    mkdirSync(join(run, 'containerd', SANDBOX, 'x'));
    expect(await bundleKind([join(run, 'containerd', SANDBOX, 'x', '{id}')], '..', UID, 'workload')).toBeUndefined();
  });
});

describe('judge', () => {
  /** A reading of the pod's cgroup: tasks per child cgroup, by its name on the node. */
  const reading = (tasks: Record<string, number>) => ({
    found: true as const,
    listedAt: T,
    dir: '/x',
    children: Object.entries(tasks).map(([name, n]) => ({ ...childCgroupOf(name), tasks: n })),
  });
  const C3 = 'c3'.repeat(32);
  const kinds = new Map<string, CgroupKind | undefined>([
    [kindKey({ id: SANDBOX, role: 'workload' }), 'sandbox'],
    [kindKey({ id: SANDBOX, role: 'monitor' }), 'monitor-of-this-pod'],
    [kindKey({ id: C1, role: 'workload' }), 'container'],
    [kindKey({ id: C1, role: 'monitor' }), 'monitor-of-this-pod'],
    [kindKey({ id: C2, role: 'workload' }), undefined],
    [kindKey({ id: C2, role: 'monitor' }), undefined],
    // Kinds that do not fit the role (never learnt so by the witness): ignoring either would be a key mixed up.
    [kindKey({ id: C3, role: 'workload' }), 'monitor-of-this-pod'],
    [kindKey({ id: C3, role: 'monitor' }), 'sandbox'],
  ]);
  it.each<[string, Record<string, number>, string]>([
    ['every container empty, the sandbox running', { [SANDBOX]: 1, [C1]: 0 }, 'proven: 1 container cgroup(s) empty, the sandbox aaaaaaaaaaaa still runs'],
    ['everything gone, the sandbox too', { [C1]: 0 }, 'proven: 1 container cgroup(s) empty, no sandbox process left'],
    ['a container with processes left', { [SANDBOX]: 1, [C1]: 2 }, 'not: container c1c1c1c1c1c1 has 2 process(es) left'],
    [
      'a live cgroup its bundle does not name',
      { [SANDBOX]: 1, [C2]: 1 },
      'not: cgroup c2c2c2c2c2c2 has processes and its runtime bundle does not say it is the sandbox',
    ],
    [
      'every container empty, its conmon and the sandbox’s still live',
      { [`crio-${SANDBOX}`]: 1, [`crio-conmon-${SANDBOX}`]: 1, [`crio-${C1}`]: 0, [`crio-conmon-${C1}`]: 1 },
      'proven: 1 container cgroup(s) empty, the sandbox aaaaaaaaaaaa still runs, 2 monitor (conmon) cgroup(s) still live, ignored',
    ],
    ['a container still live beside its conmon', { [`crio-${C1}`]: 1, [`crio-conmon-${C1}`]: 1 }, 'not: container c1c1c1c1c1c1 has 1 process(es) left'],
    [
      'a live conmon whose container’s bundle does not name this pod',
      { [`crio-${C1}`]: 0, [`crio-conmon-${C2}`]: 1 },
      'not: the monitor (conmon) cgroup of c2c2c2c2c2c2 has processes and no runtime bundle of that id names this pod',
    ],
    [
      'a live cgroup whose kind is a monitor’s',
      { [`crio-${C3}`]: 1 },
      'not: cgroup c3c3c3c3c3c3 has processes and its runtime bundle does not say it is the sandbox',
    ],
    [
      'a live conmon whose kind is the sandbox’s',
      { [`crio-conmon-${C3}`]: 1 },
      'not: the monitor (conmon) cgroup of c3c3c3c3c3c3 has processes and no runtime bundle of that id names this pod',
    ],
  ])('%s', (_case, tasks, want) => {
    const j = judge(reading(tasks), kinds);
    expect(j.proven ? `proven: ${j.detail}` : `not: ${j.why}`).toBe(want);
    if (j.proven) expect(j.exitedBy).toBe(T);
  });
  it('proves nothing without the pod’s cgroup', () => {
    expect(judge({ found: false, looked: ['/a', '/b'] }, kinds)).toMatchObject({ proven: false });
  });
});

describe('which pods the witness watches', () => {
  const pod = (over: { grace?: number; cost?: string; witnessed?: boolean }): V1Pod => ({
    metadata: {
      name: 'p',
      uid: UID,
      ...(over.grace !== undefined ? { deletionTimestamp: new Date(T), deletionGracePeriodSeconds: over.grace } : {}),
      annotations: over.cost !== undefined ? { 'controller.kubernetes.io/pod-deletion-cost': over.cost } : {},
    },
    status: over.witnessed ? { conditions: [witnessCondition({ exitedBy: T, node: 'n' }, 'd', T)] } : {},
  });
  it.each<[string, Parameters<typeof pod>[0], boolean]>([
    ['a leader in a graceful deletion', { grace: 30, cost: '100' }, true],
    ['a leader not being deleted', { cost: '100' }, false],
    ['a leader force-deleted', { grace: 0, cost: '100' }, false],
    ['a standby (no leader cost)', { grace: 30 }, false],
    // Someone else's condition (the witness remembers its own): it must not silence the witness.
    ['a leader that already carries a containers-exited condition', { grace: 30, cost: '100', witnessed: true }, true],
  ])('%s', (_case, over, want) => {
    expect(wantsWitness(pod(over), '100')).toBe(want);
  });
});

describe('evidence on the pod', () => {
  const withMessage = (message: string, over: Record<string, string> = {}): V1Pod => ({
    status: { conditions: [{ type: CONTAINERS_EXITED, status: 'True', reason: 'AllContainersExited', message, ...over }] },
  });
  it('round-trips the instant to the microsecond field and the node', () => {
    const c = witnessCondition({ exitedBy: T, node: 'node-1.example' }, '2 container cgroup(s) empty', T + 5);
    expect(witnessEvidence({ status: { conditions: [c] } })).toEqual({ exitedBy: T, node: 'node-1.example' });
  });
  it.each<[string, V1Pod]>([
    ['no condition', {}],
    ['status False', withMessage(evidenceMessage({ exitedBy: T, node: 'n' }, 'd'), { status: 'False' })],
    ['another reason', withMessage(evidenceMessage({ exitedBy: T, node: 'n' }, 'd'), { reason: 'Guess' })],
    ['a message of another shape', withMessage('containers exited, probably')],
    ['a time that is not RFC 3339', withMessage('every container exited by yesterday on node n; d')],
  ])('ignores %s', (_case, pod) => {
    expect(witnessEvidence(pod)).toBeUndefined();
  });
});

describe('witnessedNodes', () => {
  const wpod = (node: string, ready: string, deleting = false): V1Pod => ({
    metadata: { name: `w-${node}`, ...(deleting ? { deletionTimestamp: new Date(T) } : {}) },
    spec: { nodeName: node, containers: [] },
    status: { conditions: [{ type: 'Ready', status: ready }] },
  });
  const node = (name: string, ready: string) => ({ metadata: { name }, status: { conditions: [{ type: 'Ready', status: ready }] } });
  it('counts a Ready witness on a Ready node only', () => {
    const nodes = [node('a', 'True'), node('b', 'True'), node('c', 'Unknown'), node('d', 'True')];
    const pods = [wpod('a', 'True'), wpod('b', 'False'), wpod('c', 'True'), wpod('d', 'True', true), wpod('e', 'True')];
    expect([...witnessedNodes(pods, nodes)]).toEqual(['a']);
  });
});

describe('the sweep', () => {
  /** Two leaders being deleted on one node, their container cgroups in a v1 pids tree: uid → pids.current per container. */
  function node(pods: Record<string, Record<string, number>>): { layout: CgroupLayout; set: (uid: string, id: string, n: number) => void } {
    const fs = tmp();
    const base = join(fs, 'pids', 'node-1');
    const set = (uid: string, id: string, n: number) => {
      mkdirSync(join(base, 'kubepods', 'besteffort', `pod${uid}`, id), { recursive: true });
      writeFileSync(join(base, 'kubepods', 'besteffort', `pod${uid}`, id, 'pids.current'), `${n}\n`);
    };
    for (const [uid, containers] of Object.entries(pods)) for (const [id, n] of Object.entries(containers)) set(uid, id, n);
    return { layout: { version: 1, base }, set };
  }

  /** The node's pods as a test hands them over: what the informer would emit. */
  function podSource(): PodSource & { add: (pod: V1Pod) => void } {
    const handlers: ((pod: V1Pod) => void)[] = [];
    const source = {
      on: (event: string, handler: (pod: V1Pod) => void) => {
        if (event === 'add') handlers.push(handler);
        return source;
      },
      start: () => undefined,
      stop: () => undefined,
      hasSynced: () => true,
      add: (pod: V1Pod) => handlers.forEach((h) => h(pod)),
    };
    return source as unknown as PodSource & { add: (pod: V1Pod) => void };
  }

  /** A witness of node-1 sweeping every 5 ms, writing through `http`. */
  const sweeping = (http: Pick<KubeHttp, 'patch'>, layout: CgroupLayout, pods: PodSource, metrics = makeWitnessMetrics()) =>
    new Witness(
      http,
      { node: 'node-1', layout, bundleTemplates: [], pollMs: 5, leaderCost: desiredDeletionCost(1) ?? '' },
      pino({ level: 'silent' }),
      metrics,
      pods,
    );

  const leader = (name: string, uid: string): V1Pod => ({
    metadata: {
      namespace: 'csi',
      name,
      uid,
      deletionTimestamp: new Date(T),
      deletionGracePeriodSeconds: 30,
      annotations: { [DELETION_COST]: desiredDeletionCost(1) ?? '' },
    },
  });

  it('writes its own evidence over a condition someone else put on the pod, once', async () => {
    const A = 'aaaaaaaa-0000-4000-8000-000000000003';
    const { layout, set } = node({ [A]: { [C1]: 1 } });
    const written: unknown[] = [];
    const metrics = makeWitnessMetrics();
    const http = {
      patch: (_path: string, body: unknown) => {
        written.push(body);
        return Promise.resolve();
      },
    } as unknown as Pick<KubeHttp, 'patch'>;
    const pods = podSource();
    const witness = sweeping(http, layout, pods, metrics);
    const forged = {
      ...leader('a', A),
      status: { conditions: [witnessCondition({ exitedBy: Date.parse('2099-01-01T00:00:00Z'), node: 'node-1' }, 'not the witness', T)] },
    };
    witness.start();
    try {
      pods.add(forged);
      set(A, C1, 0);
      await vi.waitFor(() => expect(written).toHaveLength(1), { timeout: 2_000, interval: 5 });
      expect(written[0]).toMatchObject({ status: { conditions: [{ type: CONTAINERS_EXITED, message: expect.not.stringContaining('2099') as unknown }] } });
      // Its own condition coming back on the watch does not make it watch, or write, again.
      pods.add({ ...forged, status: { conditions: [(written[0] as V1Pod).status?.conditions?.[0] ?? {}] } } as V1Pod);
      expect((await metrics.watching.get()).values[0]?.value).toBe(0);
      expect(written).toHaveLength(1);
    } finally {
      witness.stop();
    }
  });

  it('goes on for the node’s other leaders while one pod’s evidence is being written', async () => {
    const A = 'aaaaaaaa-0000-4000-8000-000000000001';
    const B = 'bbbbbbbb-0000-4000-8000-000000000002';
    const { layout, set } = node({ [A]: { [C1]: 0 }, [B]: { [C2]: 1 } });
    const written: string[] = [];
    let finishA: () => void = () => undefined;
    // A's status write hangs, as on a busy API server; B's is answered at once.
    const http = {
      patch: (path: string) => {
        written.push(path);
        return path.includes('/pods/a/') ? new Promise<void>((resolve) => (finishA = resolve)) : Promise.resolve();
      },
    } as unknown as Pick<KubeHttp, 'patch'>;
    const pods = podSource();
    const witness = sweeping(http, layout, pods);
    witness.start();
    try {
      pods.add(leader('a', A));
      pods.add(leader('b', B));
      await vi.waitFor(() => expect(written).toEqual(['/api/v1/namespaces/csi/pods/a/status']), { timeout: 2_000, interval: 5 });
      // B's container exits while A's write is still pending: B is proven and written all the same.
      set(B, C2, 0);
      await vi.waitFor(() => expect(written).toContain('/api/v1/namespaces/csi/pods/b/status'), { timeout: 2_000, interval: 5 });
      expect(written.filter((p) => p.includes('/pods/a/'))).toHaveLength(1);
    } finally {
      finishA();
      witness.stop();
    }
  });
});
