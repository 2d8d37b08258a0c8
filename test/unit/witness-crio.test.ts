// The node witness on CRI-O with conmon, as OpenShift's nodes run it (issue 35): each container's conmon in a
// cgroup of its own beside the container's, the sandbox's cgroup empty (drop_infra_ctr) or running pause. Cgroup and
// bundle trees laid out in a temporary directory as the kernel and CRI-O lay them out, read by the witness's own
// sweep step (judgePodCgroups).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDirs } from './temp-dirs.js';
import { type CgroupLayout, type CgroupRole, detectLayout } from '../../src/witness/cgroups.js';
import { type CgroupKind, kindFromAnnotations } from '../../src/witness/runtime.js';
import { judgePodCgroups } from '../../src/witness/witness.js';

const UID = '58e6b1b6-66e1-4753-8758-6214d563a2c6';
const OTHER = '0c7d3a51-2b1e-4f6a-9d0e-7a5b3c2d1e0f';
const SANDBOX = 'aa'.repeat(32);
const C1 = 'c1'.repeat(32);
const C2 = 'c2'.repeat(32);
/** A container of another pod on the node. */
const X = 'ee'.repeat(32);
const T = Date.parse('2026-12-06T09:30:00.250Z');

const tmp = tempDirs('witness-crio-');

/** The annotations CRI-O 1.36 writes in a bundle's config.json. */
const crio = (type: 'sandbox' | 'container', uid: string): Record<string, string> => ({
  'io.kubernetes.cri-o.ContainerType': type,
  'io.kubernetes.pod.uid': uid,
  'io.kubernetes.pod.name': uid === UID ? 'csi-controller-7d9f' : 'someone-else',
  'io.kubernetes.pod.namespace': 'csi',
  ...(type === 'container' ? { 'io.kubernetes.container.name': 'csi-provisioner' } : {}),
});

/** The node's runtime state: containerd's task bundles and CRI-O's container user data, as the witness mounts them. */
function runtimeState(): {
  templates: string[];
  crioBundle: (id: string, config: Record<string, string> | string) => void;
  containerdBundle: (id: string, config: Record<string, string> | string) => void;
} {
  const run = tmp();
  const write = (dir: string, config: Record<string, string> | string) => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'config.json'), typeof config === 'string' ? config : JSON.stringify({ ociVersion: '1.2.0', annotations: config }));
  };
  return {
    templates: [
      join(run, 'containerd', 'io.containerd.runtime.v2.task', 'k8s.io', '{id}'),
      join(run, 'containers', 'storage', 'overlay-containers', '{id}', 'userdata'),
    ],
    crioBundle: (id, config) => write(join(run, 'containers', 'storage', 'overlay-containers', id, 'userdata'), config),
    containerdBundle: (id, config) => write(join(run, 'containerd', 'io.containerd.runtime.v2.task', 'k8s.io', id), config),
  };
}

interface PodTree {
  layout: CgroupLayout;
  /** Sets a child cgroup's processes (cgroup v2: populated or not), creating it. */
  set: (name: string, tasks: number) => void;
}

/** A node's cgroup tree as the kernel shows it, pod UID's cgroup where the kubelet's driver puts it, and the names CRI-O gives its children. */
interface CrioNode {
  name: string;
  tree: () => Promise<PodTree>;
  /** A container's (or the sandbox's) cgroup, and its conmon's. */
  cg: (id: string) => string;
  conmon: (id: string) => string;
}

const v1Cgroupfs: CrioNode = {
  name: 'cgroup v1, cgroupfs driver',
  tree: async () => {
    const fs = tmp();
    mkdirSync(join(fs, 'pids'));
    writeFileSync(join(fs, 'pids', 'pids.max'), 'max\n');
    const pod = join(fs, 'pids', 'node-2', 'kubepods', 'burstable', `pod${UID}`);
    mkdirSync(pod, { recursive: true });
    writeFileSync(join(pod, 'pids.current'), '3\n');
    const set = (name: string, tasks: number) => {
      mkdirSync(join(pod, name), { recursive: true });
      writeFileSync(join(pod, name, 'pids.current'), `${tasks}\n`);
    };
    return { layout: await detectLayout(fs, undefined, `12:pids:/node-2/kubepods/burstable/pod${UID}/crio-${C1}\n`), set };
  },
  cg: (id) => `crio-${id}`,
  conmon: (id) => `crio-conmon-${id}`,
};

const SLICE = `kubepods-burstable-pod${UID.replaceAll('-', '_')}.slice`;

const v1Systemd: CrioNode = {
  name: 'cgroup v1, systemd driver (OpenShift)',
  tree: async () => {
    const fs = tmp();
    mkdirSync(join(fs, 'pids'));
    writeFileSync(join(fs, 'pids', 'cgroup.procs'), '1\n');
    const pod = join(fs, 'pids', 'kubepods.slice', 'kubepods-burstable.slice', SLICE);
    mkdirSync(pod, { recursive: true });
    const set = (name: string, tasks: number) => {
      mkdirSync(join(pod, name), { recursive: true });
      writeFileSync(join(pod, name, 'pids.current'), `${tasks}\n`);
    };
    return { layout: await detectLayout(fs, undefined, `11:pids:/kubepods.slice/kubepods-burstable.slice/${SLICE}/crio-${C1}.scope\n`), set };
  },
  cg: (id) => `crio-${id}.scope`,
  conmon: (id) => `crio-conmon-${id}.scope`,
};

const v2Systemd: CrioNode = {
  name: 'cgroup v2, systemd driver',
  tree: async () => {
    const fs = tmp();
    writeFileSync(join(fs, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    const pod = join(fs, 'kubepods.slice', 'kubepods-burstable.slice', SLICE);
    mkdirSync(pod, { recursive: true });
    const set = (name: string, tasks: number) => {
      mkdirSync(join(pod, name), { recursive: true });
      writeFileSync(join(pod, name, 'cgroup.events'), `populated ${tasks > 0 ? 1 : 0}\nfrozen 0\n`);
    };
    return { layout: await detectLayout(fs, undefined, '0::/\n'), set };
  },
  cg: (id) => `crio-${id}.scope`,
  conmon: (id) => `crio-conmon-${id}.scope`,
};

/** One sweep of the witness over pod UID: proven with its detail, or why not. */
async function sweep(tree: PodTree, templates: readonly string[], kinds = new Map<string, CgroupKind>()): Promise<string> {
  const j = await judgePodCgroups({ layout: tree.layout, bundleTemplates: templates }, UID, kinds, () => T);
  return j.proven ? `proven: ${j.detail}` : `not: ${j.why}`;
}

describe.each([v1Cgroupfs, v1Systemd, v2Systemd])('CRI-O with conmon, $name', ({ tree, cg, conmon }) => {
  it('drop_infra_ctr (the sandbox’s cgroup empty): blocked while a container runs beside its conmon, proven once every container exited, their conmons still live', async () => {
    const t = await tree();
    const { templates, crioBundle } = runtimeState();
    crioBundle(C1, crio('container', UID));
    crioBundle(C2, crio('container', UID));
    t.set(cg(SANDBOX), 0);
    t.set(cg(C1), 1);
    t.set(conmon(C1), 1);
    t.set(cg(C2), 0);
    t.set(conmon(C2), 1);
    const kinds = new Map<string, CgroupKind>();
    // The container's own cgroup blocks, whatever is said of its conmon.
    expect(await sweep(t, templates, kinds)).toBe('not: container c1c1c1c1c1c1 has 1 process(es) left');
    t.set(cg(C1), 0);
    expect(await sweep(t, templates, kinds)).toBe(
      'proven: 3 container cgroup(s) empty, no sandbox process left, 2 monitor (conmon) cgroup(s) still live, ignored',
    );
  });

  it('a live conmon cgroup named after another pod’s container is not ignored', async () => {
    const t = await tree();
    const { templates, crioBundle } = runtimeState();
    crioBundle(C1, crio('container', UID));
    crioBundle(X, crio('container', OTHER));
    t.set(cg(C1), 0);
    t.set(conmon(X), 1);
    expect(await sweep(t, templates)).toBe('not: the monitor (conmon) cgroup of eeeeeeeeeeee has processes and no runtime bundle of that id names this pod');
  });

  it('an infra container (drop_infra_ctr=false, shareProcessNamespace): proven with it and its conmon live, every container exited', async () => {
    const t = await tree();
    const { templates, crioBundle } = runtimeState();
    crioBundle(SANDBOX, crio('sandbox', UID));
    crioBundle(C1, crio('container', UID));
    t.set(cg(SANDBOX), 1);
    t.set(conmon(SANDBOX), 1);
    t.set(cg(C1), 0);
    expect(await sweep(t, templates)).toBe(
      'proven: 1 container cgroup(s) empty, the sandbox aaaaaaaaaaaa still runs, 1 monitor (conmon) cgroup(s) still live, ignored',
    );
  });

  it('an infra container whose bundle cannot be read: neither it nor its conmon is ignored', async () => {
    const t = await tree();
    const { templates, crioBundle } = runtimeState();
    crioBundle(SANDBOX, '{"annotations": {"io.kubernetes.cri-o.ContainerType": "sandbox", ');
    crioBundle(C1, crio('container', UID));
    t.set(cg(SANDBOX), 1);
    t.set(conmon(SANDBOX), 1);
    t.set(cg(C1), 0);
    expect(await sweep(t, templates)).toMatch(/^not: .*aaaaaaaaaaaa has processes/);
    // Its conmon alone, the infra container's cgroup emptied.
    t.set(cg(SANDBOX), 0);
    expect(await sweep(t, templates)).toBe('not: the monitor (conmon) cgroup of aaaaaaaaaaaa has processes and no runtime bundle of that id names this pod');
  });
});

describe('what a conmon cgroup’s bundle must say (cgroup v1, cgroupfs driver)', () => {
  const monitorWith = async (bundles: (state: ReturnType<typeof runtimeState>) => void): Promise<string> => {
    const t = await v1Cgroupfs.tree();
    const state = runtimeState();
    bundles(state);
    t.set(`crio-${SANDBOX}`, 0);
    t.set(`crio-${C1}`, 0);
    t.set(`crio-conmon-${C1}`, 1);
    return sweep(t, state.templates);
  };
  const blocked = 'not: the monitor (conmon) cgroup of c1c1c1c1c1c1 has processes and no runtime bundle of that id names this pod';

  it.each<[string, (state: ReturnType<typeof runtimeState>) => void, string]>([
    [
      'its container’s, naming this pod',
      (s) => s.crioBundle(C1, crio('container', UID)),
      'proven: 2 container cgroup(s) empty, no sandbox process left, 1 monitor (conmon) cgroup(s) still live, ignored',
    ],
    ['none (the container removed, or an id of nothing)', () => undefined, blocked],
    ['one that is not JSON', (s) => s.crioBundle(C1, '{not json'), blocked],
    ['annotations that are not strings', (s) => s.crioBundle(C1, '{"annotations": {"io.kubernetes.pod.uid": 7}}'), blocked],
    ['another pod’s container', (s) => s.crioBundle(C1, crio('container', OTHER)), blocked],
    ['a container that does not say for which pod', (s) => s.crioBundle(C1, { 'io.kubernetes.cri-o.ContainerType': 'container' }), blocked],
    ['this pod, but no type', (s) => s.crioBundle(C1, { 'io.kubernetes.pod.uid': UID }), blocked],
    [
      'two pod uids that disagree, this pod’s under the key read first',
      (s) => s.crioBundle(C1, { ...crio('container', OTHER), 'io.kubernetes.cri.sandbox-uid': UID }),
      blocked,
    ],
    [
      'a bundle under each runtime’s root, containerd’s (read first) naming this pod',
      (s) => {
        s.containerdBundle(C1, { 'io.kubernetes.cri.container-type': 'container', 'io.kubernetes.cri.sandbox-uid': UID });
        s.crioBundle(C1, crio('container', OTHER));
      },
      blocked,
    ],
    [
      'CRI-O’s naming this pod, beside one under containerd’s root that cannot be read',
      (s) => {
        s.containerdBundle(C1, '{not json');
        s.crioBundle(C1, crio('container', UID));
      },
      blocked,
    ],
    [
      'CRI-O’s naming this pod, beside a config.json under containerd’s root that cannot be read (a directory)',
      (s) => {
        mkdirSync(join(s.templates[0]?.replace('{id}', C1) ?? '', 'config.json'), { recursive: true });
        s.crioBundle(C1, crio('container', UID));
      },
      blocked,
    ],
  ])('%s', async (_case, bundles, want) => {
    expect(await monitorWith(bundles)).toBe(want);
  });

  it('keeps only definite answers: a bundle missing at one sweep is read again at the next', async () => {
    const t = await v1Cgroupfs.tree();
    const { templates, crioBundle } = runtimeState();
    t.set(`crio-${C1}`, 0);
    t.set(`crio-conmon-${C1}`, 1);
    const kinds = new Map<string, CgroupKind>();
    expect(await sweep(t, templates, kinds)).toBe(blocked);
    expect([...kinds]).toEqual([]);
    crioBundle(C1, crio('container', UID));
    expect(await sweep(t, templates, kinds)).toMatch(/^proven: /);
    expect([...kinds]).toEqual([[`monitor/${C1}`, 'monitor-of-this-pod']]);
  });
});

describe('kindFromAnnotations by the cgroup’s role', () => {
  it.each<[string, Record<string, string>, CgroupRole, CgroupKind | undefined]>([
    ['CRI-O container of this pod, its own cgroup', crio('container', UID), 'workload', 'container'],
    ['CRI-O container of this pod, its conmon', crio('container', UID), 'monitor', 'monitor-of-this-pod'],
    ['CRI-O sandbox of this pod, its conmon', crio('sandbox', UID), 'monitor', 'monitor-of-this-pod'],
    [
      'containerd container of this pod, a conmon cgroup',
      { 'io.kubernetes.cri.container-type': 'container', 'io.kubernetes.cri.sandbox-uid': UID },
      'monitor',
      'monitor-of-this-pod',
    ],
    ['another pod’s container, its own cgroup', crio('container', OTHER), 'workload', undefined],
    ['another pod’s container, its conmon', crio('container', OTHER), 'monitor', undefined],
    ['another pod’s sandbox, its conmon', crio('sandbox', OTHER), 'monitor', undefined],
    ['a container that does not say for which pod, its conmon', { 'io.kubernetes.cri-o.ContainerType': 'container' }, 'monitor', undefined],
    ['this pod’s, of an unknown type, a conmon cgroup', { 'io.kubernetes.cri-o.ContainerType': 'vm', 'io.kubernetes.pod.uid': UID }, 'monitor', undefined],
    // Read key by key, the first would have said "sandbox" of a live container.
    [
      'two types that disagree, the sandbox’s under the key read first',
      { ...crio('container', UID), 'io.kubernetes.cri.container-type': 'sandbox' },
      'workload',
      undefined,
    ],
    [
      'two pod uids that disagree, this pod’s under the key read first, a sandbox',
      { ...crio('sandbox', OTHER), 'io.kubernetes.cri.sandbox-uid': UID },
      'workload',
      undefined,
    ],
  ])('%s', (_case, annotations, role, want) => {
    expect(kindFromAnnotations(annotations, UID, role)).toBe(want);
  });
});
