// Which of a pod's cgroups may hold processes after its containers exited: the sandbox's pause process lives on
// until the kubelet stops the sandbox, after every container, and CRI-O's conmon (each container's monitor) outlives
// its container; neither can act on a Lease. The runtime's OCI bundle says what an id runs and for which pod, and
// the bundle directory is read-only to us like the cgroup tree: no runtime socket, which would grant its write API.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { CgroupRole } from './cgroups.js';

/** `monitor-of-this-pod`: a monitor cgroup whose container's bundle names this pod (its processes are conmon's). */
export type CgroupKind = 'sandbox' | 'container' | 'monitor-of-this-pod';

const Bundle = z.object({ annotations: z.record(z.string(), z.string()).optional() });

/** containerd's CRI plugin and CRI-O annotate each bundle with what it runs and for which pod. */
const TYPE_KEYS = ['io.kubernetes.cri.container-type', 'io.kubernetes.cri-o.ContainerType'];
const POD_UID_KEYS = ['io.kubernetes.cri.sandbox-uid', 'io.kubernetes.pod.uid'];

/** The distinct values the annotations give under any of `keys`. */
const said = (annotations: Record<string, string>, keys: readonly string[]): string[] => [
  ...new Set(keys.map((k) => annotations[k]).filter((v) => v !== undefined)),
];

/** What a bundle's annotations say a cgroup of `role` runs for pod `uid`; undefined when they do not say so plainly. */
export function kindFromAnnotations(annotations: Record<string, string>, uid: string, role: CgroupRole): CgroupKind | undefined {
  const types = said(annotations, TYPE_KEYS);
  const podUids = said(annotations, POD_UID_KEYS);
  // Two keys that disagree: whichever we read first, the runtime meant something we do not understand.
  if (types.length > 1 || podUids.length > 1) return undefined;
  const [type] = types;
  const [podUid] = podUids;
  if (type !== 'sandbox' && type !== 'container') return undefined;
  // A live monitor is ignored only for a container or sandbox the bundle says is this pod's: a conmon cgroup named
  // after another pod's container (or an id without a bundle) may hold anything.
  if (role === 'monitor') return podUid === uid ? 'monitor-of-this-pod' : undefined;
  // Another pod's bundle in this pod's cgroup would be a runtime we do not understand.
  if (podUid !== undefined && podUid !== uid) return undefined;
  if (type === 'sandbox') return podUid === uid ? 'sandbox' : undefined;
  return 'container';
}

/** One template's bundle of an id: its annotations, or whether it is missing or cannot be read or parsed. */
async function readBundle(path: string): Promise<Record<string, string> | 'missing' | 'unreadable'> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    return (err as NodeJS.ErrnoException | undefined)?.code === 'ENOENT' ? 'missing' : 'unreadable';
  }
  try {
    const parsed = Bundle.safeParse(JSON.parse(text));
    return parsed.success ? (parsed.data.annotations ?? {}) : 'unreadable';
  } catch {
    return 'unreadable';
  }
}

/**
 * What the bundle of `id` (each template with `{id}` replaced) says a cgroup of `role` runs. Undefined when no
 * template has one, one cannot be read or parsed, or two have one (which runtime runs it is not plain): the caller
 * then proves nothing.
 */
export async function bundleKind(templates: readonly string[], id: string, uid: string, role: CgroupRole): Promise<CgroupKind | undefined> {
  if (!/^[0-9a-zA-Z_.-]+$/.test(id) || id === '.' || id === '..') return undefined;
  const bundles = (await Promise.all(templates.map((t) => readBundle(`${t.replaceAll('{id}', id)}/config.json`)))).filter((b) => b !== 'missing');
  const [annotations] = bundles;
  if (bundles.length !== 1 || annotations === undefined || annotations === 'unreadable') return undefined;
  return kindFromAnnotations(annotations, uid, role);
}
