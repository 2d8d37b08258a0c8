// CRI-O's side of the real nodes' record (hack/node-record.ts --runtime crio): pure parsers of `crictl events -o json`
// (CRI GetContainerEvents, CRI-O with enable_pod_events) and `crictl inspect`, tested in
// test/unit/node-events-crio.test.ts on captured output. containerd's and the kubelet's are in node-events.ts.
import { z } from 'zod';
import type { Owner, RuntimeEvent } from './node-events.js';

/**
 * Cuts the output of `crictl events -o json` into the text of each event: crictl prints every event as
 * pretty-printed JSON over many lines, and a pipe hands them over in chunks cut anywhere. Feed it the chunks in
 * order; it returns the events completed by each. Braces are counted outside strings only (a container's message
 * may hold any); an event begins with a `{` that begins a line, as crictl indents every nested one, so a line that
 * is not JSON (crictl's own "failed to format container event") is skipped, and cannot swallow the next event.
 */
export function jsonObjectSplitter(): (chunk: string) => string[] {
  let open = ''; // the text of an event still open at the end of the last chunk
  let depth = 0,
    inString = false,
    escaped = false,
    afterNewline = true;
  return (chunk) => {
    const done: string[] = [];
    let from = 0; // where this chunk's part of the open event begins
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk[i];
      const startsLine = afterNewline;
      afterNewline = c === '\n';
      if (c === '{' && startsLine) {
        // A new event: one still open is broken (whole events close before the next begins).
        open = '';
        from = i;
        depth = 0;
        inString = false;
        escaped = false;
      } else if (depth === 0) continue;
      if (inString) {
        if (escaped) escaped = false;
        else if (c === '\\') escaped = true;
        else if (c === '"') inString = false;
      } else if (c === '"') inString = true;
      else if (c === '{') depth++;
      else if (c === '}' && --depth === 0) {
        done.push(open + chunk.slice(from, i + 1));
        open = '';
      }
    }
    if (depth > 0) open += chunk.slice(from);
    return done;
  };
}

// Protobuf's JSON writes int64 as a string (and may leave a zero out): nanoseconds since the epoch, 0 for unset.
const Nanos = z.union([z.string().regex(/^\d+$/), z.number().int().nonnegative()]).default('0');
/** The fields read of a CRI ContainerEventResponse, as crictl prints it (camelCase, from protojson). */
const CriEvent = z.object({
  containerId: z.string().min(1),
  containerEventType: z.string(),
  createdAt: Nanos,
  podSandboxStatus: z.object({
    id: z.string(),
    metadata: z.object({ name: z.string().min(1), namespace: z.string().default(''), uid: z.string().default('') }),
  }),
  containersStatuses: z
    .array(
      z.object({
        id: z.string(),
        metadata: z.object({ name: z.string() }),
        startedAt: Nanos,
        finishedAt: Nanos,
        exitCode: z.number().int().default(0),
      }),
    )
    .nullish(),
});

const KINDS: Record<string, RuntimeEvent['kind'] | undefined> = {
  CONTAINER_CREATED_EVENT: 'created',
  CONTAINER_STARTED_EVENT: 'started',
  CONTAINER_STOPPED_EVENT: 'exited',
};

/** An ISO time (to the millisecond, as every other time in the record) of nanoseconds since the epoch; 0 is unset. */
function isoOfNanos(ns: string | number): string | undefined {
  const ms = typeof ns === 'string' ? Number(BigInt(ns) / 1_000_000n) : Math.floor(ns / 1e6);
  return ms > 0 ? new Date(ms).toISOString() : undefined;
}

/**
 * One event of `crictl events -o json` (CRI GetContainerEvents, from CRI-O with enable_pod_events): a container, or
 * the pod's sandbox when the id is the sandbox's, created, started or stopped, with its owner, which CRI-O sends
 * along (sandbox metadata and every container's status). Times are the container status's, earlier than the event's
 * own createdAt (stamped after CRI-O gathered the statuses): started is CRI-O's time.Now() right after `runc start`;
 * finished is the change time of the exit file conmon writes after reaping the process, draining its output and
 * syncing its log (CRI-O 1.36 internal/oci `updateContainerStatusFromExitFile` → `getFinishedTime`: st.Ctim). The
 * kernel stamps a new file from its coarse clock, so that time may be up to a tick (4 ms here) before the write.
 * CRI-O rewrites a finished time later (StopContainer or RemoveContainer on a dead container: time.Now()), so an exit
 * is read only from the container's own stop event, and deletions are skipped. CRI events carry no pid.
 */
export function parseCrioEvent(text: string): (RuntimeEvent & { owner: Owner }) | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = CriEvent.safeParse(json);
  if (!parsed.success) return undefined;
  const e = parsed.data;
  const kind = KINDS[e.containerEventType];
  if (!kind) return undefined;
  const sandbox = e.podSandboxStatus;
  const pod = { namespace: sandbox.metadata.namespace, pod: sandbox.metadata.name, uid: sandbox.metadata.uid };
  const at = isoOfNanos(e.createdAt);
  if (!at) return undefined;
  if (e.containerId === sandbox.id) return { t: at, kind, containerId: e.containerId, owner: pod };
  // CRI-O lists the statuses of every container of the pod: the event's is the one with its id.
  const status = e.containersStatuses?.find((s) => s.id === e.containerId);
  if (!status) return undefined;
  const owner = { ...pod, container: status.metadata.name };
  if (kind === 'started') return { t: isoOfNanos(status.startedAt) ?? at, kind, containerId: e.containerId, owner };
  // -1: CRI-O has no exit code for it.
  if (kind === 'exited')
    return { t: isoOfNanos(status.finishedAt) ?? at, kind, containerId: e.containerId, owner, ...(status.exitCode >= 0 ? { exitCode: status.exitCode } : {}) };
  return { t: at, kind, containerId: e.containerId, owner };
}

/** The pid of a container's (or a sandbox's infra container's) process, from `crictl inspect` (`inspectp`): info.pid. */
export function parseCrictlInspectPid(text: string): number | undefined {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = z.object({ info: z.object({ pid: z.number().int().positive() }) }).safeParse(json);
  return parsed.success ? parsed.data.info.pid : undefined;
}
