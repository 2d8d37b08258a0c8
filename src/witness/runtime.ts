// Which of a pod's cgroups is its sandbox: the pause process lives on until the kubelet stops the sandbox, after
// every container, and cannot act on a Lease. The runtime's OCI bundle says so in its annotations, and the
// bundle directory is read-only to us like the cgroup tree: no runtime socket, which would grant its write API.
import { readFile } from 'node:fs/promises';
import { z } from 'zod';

export type CgroupKind = 'sandbox' | 'container';

const Bundle = z.object({ annotations: z.record(z.string(), z.string()).optional() });

/** containerd's CRI plugin and CRI-O annotate each bundle with what it runs and for which pod. */
const TYPE_KEYS = ['io.kubernetes.cri.container-type', 'io.kubernetes.cri-o.ContainerType'];
const SANDBOX_UID_KEYS = ['io.kubernetes.cri.sandbox-uid', 'io.kubernetes.pod.uid'];

/** What a bundle's annotations say the cgroup runs for pod `uid`; undefined when they do not say so plainly. */
export function kindFromAnnotations(annotations: Record<string, string>, uid: string): CgroupKind | undefined {
  const type = TYPE_KEYS.map((k) => annotations[k]).find((v) => v !== undefined);
  const podUid = SANDBOX_UID_KEYS.map((k) => annotations[k]).find((v) => v !== undefined);
  // A bundle of another pod's sandbox in this pod's cgroup would be a runtime we do not understand.
  if (podUid !== undefined && podUid !== uid) return undefined;
  if (type === 'sandbox') return podUid === uid ? 'sandbox' : undefined;
  return type === 'container' ? 'container' : undefined;
}

/**
 * Reads the bundle of `id` from the first template (`{id}` replaced) that has one. Undefined when none does, or
 * it cannot be read or parsed: the caller then proves nothing.
 */
export async function bundleKind(templates: readonly string[], id: string, uid: string): Promise<CgroupKind | undefined> {
  if (!/^[0-9a-zA-Z_.-]+$/.test(id)) return undefined;
  for (const template of templates) {
    let text: string;
    try {
      text = await readFile(`${template.replaceAll('{id}', id)}/config.json`, 'utf8');
    } catch {
      continue;
    }
    try {
      const parsed = Bundle.safeParse(JSON.parse(text));
      return parsed.success ? kindFromAnnotations(parsed.data.annotations ?? {}, uid) : undefined;
    } catch {
      return undefined;
    }
  }
  return undefined;
}
