// The real nodes' own record of their containers (hack/node-record.ts writes it, tests and benchmarks read it):
// when the node's runtime (containerd or CRI-O) started a container or saw it exit, and when the kubelet sent it its
// stop signal. The record's shape, and pure parsers of containerd's event stream (`ctr events`) and of the kubelet's
// log line, tested in test/unit/node-events.test.ts; CRI-O's (`crictl events -o json`) are in crio-events.ts.

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
   * runtime stamps, which lags the kernel (hack/node-record.ts, exitTime). Never earlier than the exit.
   */
  source?: 'proc';
  /** The runtime's own stamp of an exit, where `t` is not it: /proc showed the exit first, or (CRI-O) `t` is the stamp plus a clock tick. */
  runtimeAt?: string;
}

/**
 * The granularity of the kernel's coarse clock, which dates a file's change (clock_getres(CLOCK_REALTIME_COARSE) on
 * these nodes' kernel: 4 ms, HZ=250). A file written at real time w carries a change time in (w - tick, w].
 */
export const COARSE_TICK_MS = 4;

/**
 * The time an exit is recorded at: the earlier of two bounds that both come no earlier than the death. The runtime's:
 * containerd stamps time.Now() after reaping the process; CRI-O's time is the change time of the exit file conmon
 * writes after the reap, which the coarse clock can date up to a tick before the write, so its bound is that time
 * plus a tick. And /proc's, where the close watch ran (`goneSeen`): when it first found the process a zombie or
 * gone, a poll after the death if it had seen it alive, but as late as the watch began otherwise (it starts on the
 * kubelet's log line, which may come after the death). Judged by the earlier bound, a release after the death is
 * never taken for one before it; one before the death by less than the bound's lateness would pass.
 */
export function exitTime(runtime: 'containerd' | 'crio', runtimeAt: string, goneSeen?: string): Pick<NodeEvent, 't' | 'source' | 'runtimeAt'> {
  const stamp = Date.parse(runtimeAt);
  const bound = runtime === 'crio' ? stamp + COARSE_TICK_MS : stamp;
  if (goneSeen !== undefined && Date.parse(goneSeen) < bound) return { t: goneSeen, source: 'proc', runtimeAt };
  return bound === stamp ? { t: runtimeAt } : { t: new Date(bound).toISOString(), runtimeAt };
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
