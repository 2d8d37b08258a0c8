// Where a workload's sidecars keep their Leases: the pod's namespace, unless a container is started with
// --leader-election-namespace (csi-lib-utils; client-go components spell it --leader-elect-resource-namespace).
// `$(VAR)` is expanded as the kubelet does, from the container's literal env values and the downward API's
// metadata.namespace; a value we cannot expand names no namespace we could look in.
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';

const FLAGS = ['leader-election-namespace', 'leader-elect-resource-namespace'];

/** The flag's value in a container's args (`--flag=v`, `--flag v`, single dash too), or undefined. */
function flagValue(args: readonly string[]): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const m = /^--?([a-z-]+)(?:=(.*))?$/.exec(args[i] ?? '');
    if (!m?.[1] || !FLAGS.includes(m[1])) continue;
    value = m[2] ?? args[i + 1]; // the last occurrence wins, as with Go's flag package
  }
  return value;
}

/** `$(VAR)` references expanded from the container's env; undefined if one cannot be. `$$` escapes a `$`. */
function expand(value: string, container: V1Container, podNamespace: string): string | undefined {
  let unknown = false;
  const out = value.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (whole, name: string | undefined) => {
    if (name === undefined) return '$';
    const env = container.env?.find((e) => e.name === name);
    if (env?.value !== undefined) return env.value;
    if (env?.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') return podNamespace;
    unknown = true;
    return whole;
  });
  return unknown ? undefined : out;
}

/** Every namespace the pod spec's containers keep leases in, the pod's own first. */
export function leaseNamespacesOf(spec: V1PodSpec | undefined, podNamespace: string): string[] {
  const out = new Set([podNamespace]);
  for (const c of [...(spec?.containers ?? []), ...(spec?.initContainers ?? [])]) {
    const raw = flagValue([...(c.command ?? []), ...(c.args ?? [])]);
    const ns = raw === undefined ? undefined : expand(raw, c, podNamespace);
    if (ns) out.add(ns);
  }
  return [...out];
}
