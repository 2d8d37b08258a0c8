// Holder → pod: which pod a Lease's holderIdentity names. CSI sidecars (csi-lib-utils) use the sanitised
// os.Hostname(), so the question is which pod had that hostname. Anything we cannot pin to exactly one pod
// is unresolved, and an unresolved holder is never released.
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { type ObservedPod, podRef } from './observed-pod.js';

export type HolderResolution =
  | { kind: 'pod'; pod: ObservedPod; via: 'pod-name' | 'pod-name-suffix' | 'host-network-node' }
  | { kind: 'none' } // empty holderIdentity: nobody holds it
  | { kind: 'unresolved'; reason: 'unknown-identity' | 'ambiguous-identity' | 'ambiguous-host-network'; message: string };

/** csi-lib-utils sanitizeName: every char outside [a-zA-Z0-9-] becomes '-', and a trailing '-' gets an 'X'. */
export function sanitizeHostname(s: string): string {
  const sanitized = s.replace(/[^a-zA-Z0-9-]/g, '-');
  return sanitized.endsWith('-') ? `${sanitized}X` : sanitized;
}

// The kubelet caps a pod's hostname at 63 chars and trims a trailing '-' or '.' (truncatePodHostnameIfNeeded).
const HOSTNAME_MAX = 63;

/** The kubelet's hostname for the pod (GeneratePodHostNameAndDomain); undefined when not its own or not knowable here. */
export function podHostname(pod: V1Pod): string | undefined {
  const spec = pod.spec;
  if (spec?.hostNetwork === true) return undefined; // the node's hostname: see resolveHolder
  if (spec?.hostnameOverride) return spec.hostnameOverride;
  if (spec?.setHostnameAsFQDN === true && spec.subdomain) return undefined; // the FQDN needs the cluster domain
  const hostname = spec?.hostname || pod.metadata?.name;
  if (!hostname) return undefined;
  return hostname.length <= HOSTNAME_MAX ? hostname : hostname.slice(0, HOSTNAME_MAX).replace(/[-.]+$/, '');
}

function describe(pods: readonly ObservedPod[]): string {
  return pods.map((p) => `${podRef(p.pod)}${p.gone ? ' (deleted)' : ''}`).join(', ');
}

/** The hostname a holderIdentity names: all of it, or — client-go style `<hostname>_<suffix>` — what precedes the first '_'. */
export function holderHostname(holderIdentity: string): string {
  // '_' never survives sanitising, so the first one ends the hostname.
  const cut = holderIdentity.indexOf('_');
  return cut === -1 ? holderIdentity : holderIdentity.slice(0, cut);
}

/** The identity a pod's sidecars elect under: the node's hostname with hostNetwork, else the pod's own; sanitised. */
export function podIdentity(pod: V1Pod): string | undefined {
  if (pod.spec?.hostNetwork === true) return pod.spec.nodeName ? sanitizeHostname(pod.spec.nodeName) : undefined;
  const own = podHostname(pod);
  return own === undefined ? undefined : sanitizeHostname(own);
}

/** The pods a holder identity can name: by their own hostname, or hostNetwork pods by their node's. */
function matchingPods(hostname: string, pods: readonly ObservedPod[]): { byPodHostname: ObservedPod[]; onNode: ObservedPod[] } {
  const byPodHostname: ObservedPod[] = [];
  const onNode: ObservedPod[] = [];
  for (const p of pods) {
    if (podIdentity(p.pod) !== hostname) continue;
    // Tombstones count: a deleted hostNetwork pod on the node may be the very holder we are asked about.
    (p.pod.spec?.hostNetwork === true ? onNode : byPodHostname).push(p);
  }
  return { byPodHostname, onNode };
}

export function resolveHolder(holderIdentity: string, pods: readonly ObservedPod[], nodes: ReadonlyMap<string, V1Node>): HolderResolution {
  if (holderIdentity === '') return { kind: 'none' };
  const hostname = holderHostname(holderIdentity);
  const { byPodHostname, onNode } = matchingPods(hostname, pods);

  if (onNode.length > 1) {
    return {
      kind: 'unresolved',
      reason: 'ambiguous-host-network',
      message: `holder '${holderIdentity}' is the hostname of a node that ran several hostNetwork pods: ${describe(onNode)}`,
    };
  }
  const matches = [...byPodHostname, ...onNode];
  if (matches.length > 1) {
    return {
      kind: 'unresolved',
      reason: 'ambiguous-identity',
      message: `holder '${holderIdentity}' matches several pods, and we cannot tell which holds it: ${describe(matches)}`,
    };
  }
  const only = matches[0];
  if (!only) {
    const node = [...nodes.keys()].find((name) => sanitizeHostname(name) === hostname);
    return {
      kind: 'unresolved',
      reason: 'unknown-identity',
      message:
        node !== undefined
          ? `holder '${holderIdentity}' is the hostname of node ${node}, where none of the observed pods ran with hostNetwork`
          : `holder '${holderIdentity}' matches none of the ${pods.length} observed pods`,
    };
  }
  const via = onNode.length > 0 ? 'host-network-node' : hostname === holderIdentity ? 'pod-name' : 'pod-name-suffix';
  return { kind: 'pod', pod: only, via };
}

/**
 * Which pod's process renews the lease now, for measuring (never for releasing): of the pods the identity can
 * name, the only one that may still run; else the only one at all. Undefined when several may run (two
 * hostNetwork pods on one node) or none matches. This is how a same-identity takeover (a new hostNetwork pod on
 * the old one's node, a re-created pod of the same name) shows up as a new leadership term.
 */
export function renewingPod(holderIdentity: string, pods: readonly ObservedPod[], mayRun: (p: ObservedPod) => boolean): ObservedPod | undefined {
  if (holderIdentity === '') return undefined;
  const { byPodHostname, onNode } = matchingPods(holderHostname(holderIdentity), pods);
  const matches = [...byPodHostname, ...onNode];
  const running = matches.filter(mayRun);
  if (running.length === 1) return running[0];
  return running.length === 0 && matches.length === 1 ? matches[0] : undefined;
}
