// What the handover engine keeps of each pod and node it watches: exactly the fields its decisions read, so
// 5,000 pods cost their identity, placement and container states rather than their whole specs (images, env,
// volumes, probes, resources) and a node its Ready condition rather than its image list. Cached objects are
// only ever read and patched (never written back whole), so nothing dropped here can be lost on the server.
// test/unit/handover-cached.test.ts checks every decision reads the same on a pod and its cached form.
import { readyCondition } from './ready.js';
import type { V1ContainerStatus, V1Node, V1Pod } from '@kubernetes/client-node';
import { HANDOVER_STATE } from '../api/names.js';
import { DELETION_COST } from './deletion-cost.js';
import { CONTAINERS_EXITED } from './witness-evidence.js';

/** The annotations decisions read (the gate's state, the deletion cost); every other one is dropped. */
const KEPT_ANNOTATIONS = [HANDOVER_STATE, DELETION_COST];

/** A container's name and state; a terminated one without its message (up to 4 KiB each) or container ID. */
function containerStatus(c: V1ContainerStatus): V1ContainerStatus {
  const { running, waiting, terminated } = c.state ?? {};
  return {
    name: c.name,
    state: c.state && {
      running: running && { startedAt: running.startedAt },
      waiting: waiting && { reason: waiting.reason },
      terminated: terminated && {
        exitCode: terminated.exitCode,
        reason: terminated.reason,
        startedAt: terminated.startedAt,
        finishedAt: terminated.finishedAt,
      },
    },
  } as V1ContainerStatus;
}

export function podForCache(pod: V1Pod): V1Pod {
  const m = pod.metadata;
  const spec = pod.spec;
  const status = pod.status;
  const witnessed = status?.conditions?.filter((c) => c.type === CONTAINERS_EXITED);
  let annotations: Record<string, string> | undefined;
  for (const k of KEPT_ANNOTATIONS) {
    const v = m?.annotations?.[k];
    if (v !== undefined) (annotations ??= {})[k] = v;
  }
  return {
    metadata: m && {
      name: m.name,
      generateName: m.generateName,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
      deletionTimestamp: m.deletionTimestamp,
      deletionGracePeriodSeconds: m.deletionGracePeriodSeconds,
      labels: m.labels,
      annotations,
    },
    spec: spec && {
      nodeName: spec.nodeName,
      hostNetwork: spec.hostNetwork,
      hostname: spec.hostname,
      hostnameOverride: spec.hostnameOverride,
      setHostnameAsFQDN: spec.setHostnameAsFQDN,
      subdomain: spec.subdomain,
      schedulingGates: spec.schedulingGates,
      containers: spec.containers.map((c) => ({ name: c.name })),
      initContainers: spec.initContainers?.map((c) => ({ name: c.name, restartPolicy: c.restartPolicy })),
    },
    status: status && {
      phase: status.phase,
      containerStatuses: status.containerStatuses?.map(containerStatus),
      initContainerStatuses: status.initContainerStatuses?.map(containerStatus),
      ephemeralContainerStatuses: status.ephemeralContainerStatuses?.map(containerStatus),
      // Of the conditions, only the node witness's evidence decides anything.
      ...(witnessed ? { conditions: witnessed } : {}),
    },
  };
}

/** A node as decisions see it: its name and whether it is Ready. */
export function nodeForCache(node: V1Node): V1Node {
  const m = node.metadata;
  const ready = readyCondition(node);
  return {
    metadata: m && { name: m.name, uid: m.uid, resourceVersion: m.resourceVersion },
    status: ready && { conditions: [{ type: ready.type, status: ready.status, reason: ready.reason }] },
  };
}

/** Whether a node update changes what decisions see (its readiness), rather than only its heartbeat. */
export function readinessChanged(node: V1Node, old: V1Node | undefined): boolean {
  return old === undefined || readyCondition(node)?.status !== readyCondition(old)?.status;
}
