// The real nodes' own record of their containers (hack/node-record.ts writes it, tests and benchmarks read it):
// when the node's runtime (containerd or CRI-O) started a container or saw it exit, and when the kubelet sent it its
// stop signal. Pure parsers of containerd's event stream (`ctr events`), of CRI-O's (`crictl events -o json`) and of
// the kubelet's log line, tested in test/unit/node-events.test.ts and test/unit/node-events-crio.test.ts.
import { z } from 'zod';

export interface NodeEvent {
  /** ISO time: the runtime's own time of the event, or the kubelet log line's time. */
  t: string;
  node: string;
  namespace: string;
  pod: string;
  uid: string;
  container?: string;
  event: 'container-started' | 'container-exited' | 'pod-started' | 'pod-stopped' | 'signal';
  pid?: number;
  exitCode?: number | null;
  signal?: string | null;
  /**
   * How an exit's time was known when not from the runtime: `proc`, its process seen exited or gone in /proc —
   * while the runtime's event stream was down, or (watched closely after its stop signal) before the time the
   * runtime stamps, which lags the kernel (hack/node-record.ts). No earlier than the exit, at most a poll later.
   */
  source?: 'proc';
  /** The runtime's own time for an exit that /proc showed first (how late its stamp was). */
  runtimeAt?: string;
}

/** What a runtime says happened to a container (or to a pod's sandbox), by container id. */
export interface RuntimeEvent {
  t: string;
  kind: 'created' | 'started' | 'exited';
  containerId: string;
  pid?: number;
  exitCode?: number;
}

/** The pod (and container: none for the pod's sandbox) a runtime's container belongs to. */
export interface Owner {
  namespace: string;
  pod: string;
  uid: string;
  container?: string;
}

// "2026-12-01 07:35:05.176635884 +0000 UTC k8s.io /tasks/exit {json}"
const CTR_LINE = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?) ([+-]\d{4}) \S+ (\S+) (\S+) (\{.*\})$/;

/** One line of `ctr -n k8s.io events`: a container created, its task started or exited (exec processes are skipped). */
export function parseContainerdEvent(line: string): RuntimeEvent | undefined {
  const m = CTR_LINE.exec(line.trim());
  if (!m) return undefined;
  const [, day, time, zone, , topic, json] = m;
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(json ?? '') as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const envelope = isoOf(day ?? '', time ?? '', zone ?? '');
  const str = (k: string): string | undefined => (typeof body[k] === 'string' ? body[k] : undefined);
  const num = (k: string): number | undefined => (typeof body[k] === 'number' ? body[k] : undefined);
  switch (topic) {
    case '/containers/create': {
      const id = str('id');
      return id ? { t: envelope, kind: 'created', containerId: id } : undefined;
    }
    case '/tasks/start': {
      const id = str('container_id');
      return id ? { t: envelope, kind: 'started', containerId: id, ...(num('pid') !== undefined ? { pid: num('pid') } : {}) } : undefined;
    }
    case '/tasks/exit': {
      const id = str('container_id');
      // An exec'd process exits under its own id; only the container's init process is the container.
      if (!id || (str('id') ?? id) !== id) return undefined;
      const at = body.exited_at as { seconds?: number; nanos?: number } | string | undefined;
      const t =
        typeof at === 'string' ? at : at?.seconds !== undefined ? new Date(at.seconds * 1000 + Math.floor((at.nanos ?? 0) / 1e6)).toISOString() : envelope;
      // Protobuf's JSON leaves out zero values: no exit_status means exit code 0.
      return { t, kind: 'exited', containerId: id, exitCode: num('exit_status') ?? 0, ...(num('pid') !== undefined ? { pid: num('pid') } : {}) };
    }
    default:
      return undefined;
  }
}

function isoOf(day: string, time: string, zone: string): string {
  const [hms, frac = ''] = time.split('.');
  const ms = (frac + '000').slice(0, 3);
  return new Date(`${day}T${hms}.${ms}${zone.slice(0, 3)}:${zone.slice(3)}`).toISOString();
}

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

// klog: I1201 07:34:08.146612   17887 kuberuntime_container.go:909] "Killing container with a grace period" pod="ns/name" podUID="…" containerName="driver" …
const KILL_LINE =
  /^I(\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+)\s+\d+ \S+\] "Killing container with a grace period" pod="([^/"]+)\/([^"]+)" podUID="([^"]*)" containerName="([^"]+)"/;

/**
 * The kubelet's "Killing container with a grace period" line: the moment it asks the runtime to stop a container
 * (the stop signal follows within milliseconds). klog writes local time without a year: `now` supplies it.
 */
export function parseKubeletStop(line: string, now: Date): Omit<NodeEvent, 'node' | 'event' | 'signal'> | undefined {
  const m = KILL_LINE.exec(line);
  if (!m) return undefined;
  const [, month, day, time, namespace, pod, uid, container] = m;
  const [hms = '', frac = ''] = (time ?? '').split('.');
  const [h, mi, s] = hms.split(':').map(Number);
  let year = now.getFullYear();
  // A line from December read in January belongs to last year.
  if (Number(month) - 1 > now.getMonth()) year -= 1;
  const at = new Date(year, Number(month) - 1, Number(day), h, mi, s, Number((frac + '000').slice(0, 3)));
  return { t: at.toISOString(), namespace: namespace ?? '', pod: pod ?? '', uid: uid ?? '', container: container ?? '' };
}

/**
 * State and start time (clock ticks since boot) of a process, from its /proc/<pid>/stat: after the last ')', as the
 * command name may hold spaces and parentheses. Undefined when the text is not a stat line.
 */
export function parseProcStat(text: string): { state: string; startTime: string } | undefined {
  const close = text.lastIndexOf(')');
  if (close < 0) return undefined;
  // Fields 3.. : state is field 3, starttime field 22.
  const fields = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const state = fields[0],
    startTime = fields[19];
  return state && startTime && /^\d+$/.test(startTime) ? { state, startTime } : undefined;
}
