// Pure translation of a pod's container spec into what the node agent runs: the binary for its image, the
// argv after $(VAR) expansion, and the environment. No I/O here, so every rule is table-tested.
import type { V1Container, V1EnvVar, V1Pod } from '@kubernetes/client-node';

export interface ImageMap {
  /** repository (without tag or digest) → binary name in the bin dir */
  images: Record<string, string>;
}

/** `registry.k8s.io/sig-storage/csi-attacher:v4.12.0` → `registry.k8s.io/sig-storage/csi-attacher` */
export function repositoryOf(image: string): string {
  const noDigest = image.split('@')[0] ?? image;
  const lastSlash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > lastSlash ? noDigest.slice(0, colon) : noDigest;
}

export function binaryFor(image: string | undefined, map: ImageMap): string | undefined {
  if (!image) return undefined;
  return map.images[image] ?? map.images[repositoryOf(image)];
}

/**
 * Kubernetes' $(VAR) expansion for command, args and env values: `$(NAME)` is replaced when NAME is
 * defined, left as is when it is not, and `$$(NAME)` escapes to a literal `$(NAME)`.
 */
export function expandVars(input: string, vars: ReadonlyMap<string, string>): string {
  let out = '';
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (c === '$' && input[i + 1] === '$') {
      out += '$';
      i++;
      continue;
    }
    if (c === '$' && input[i + 1] === '(') {
      const close = input.indexOf(')', i + 2);
      if (close > 0) {
        const name = input.slice(i + 2, close);
        const value = vars.get(name);
        if (value !== undefined) {
          out += value;
          i = close;
          continue;
        }
      }
    }
    out += c;
  }
  return out;
}

export interface PodFacts {
  hostIP: string;
  podIP: string;
  kubernetesServiceHost: string;
  kubernetesServicePort: string;
  hostname: string;
}

/** The value of a downward-API field path, or an error naming the unsupported path. */
export function fieldValue(pod: V1Pod, fieldPath: string, facts: PodFacts): string {
  const labelOrAnnotation = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(fieldPath);
  if (labelOrAnnotation) {
    const source = labelOrAnnotation[1] === 'labels' ? pod.metadata?.labels : pod.metadata?.annotations;
    return source?.[labelOrAnnotation[2] ?? ''] ?? '';
  }
  switch (fieldPath) {
    case 'metadata.name':
      return pod.metadata?.name ?? '';
    case 'metadata.namespace':
      return pod.metadata?.namespace ?? '';
    case 'metadata.uid':
      return pod.metadata?.uid ?? '';
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? '';
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? '';
    case 'status.hostIP':
      return facts.hostIP;
    case 'status.podIP':
      return facts.podIP;
    default:
      throw new Error(`unsupported fieldRef ${fieldPath}`);
  }
}

/** The container's environment, in Kubernetes order: service env first, then the container's own env. */
export function containerEnv(pod: V1Pod, container: V1Container, facts: PodFacts): Map<string, string> {
  const env = new Map<string, string>([
    ['PATH', '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
    ['HOSTNAME', facts.hostname],
    ['KUBERNETES_SERVICE_HOST', facts.kubernetesServiceHost],
    ['KUBERNETES_SERVICE_PORT', facts.kubernetesServicePort],
    ['KUBERNETES_SERVICE_PORT_HTTPS', facts.kubernetesServicePort],
  ]);
  for (const e of container.env ?? []) env.set(e.name, envValue(pod, e, env, facts));
  return env;
}

function envValue(pod: V1Pod, e: V1EnvVar, sofar: ReadonlyMap<string, string>, facts: PodFacts): string {
  if (e.value !== undefined) return expandVars(e.value, sofar);
  const fieldPath = e.valueFrom?.fieldRef?.fieldPath;
  if (fieldPath) return fieldValue(pod, fieldPath, facts);
  if (e.valueFrom) throw new Error(`env ${e.name}: only value and fieldRef are supported`);
  return '';
}

/** argv after the binary: the image's entrypoint is the binary itself, so `command[1..]` then `args`. */
export function containerArgv(container: V1Container, env: ReadonlyMap<string, string>): string[] {
  const raw = [...(container.command ?? []).slice(1), ...(container.args ?? [])];
  return raw.map((a) => expandVars(a, env));
}
