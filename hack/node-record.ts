// The node's own record of its containers, for tests and benchmarks (never for the operator): what containerd
// says happened to each container (started, exited, with exit code and time) and when the kubelet sent a
// container its stop signal, read from the kubelet's log. One process per real node (hack/nodes.sh starts it);
// it appends one JSON line per event to --out, in the shape `nodeEvents()` (hack/lib/cluster.ts) returns.
//   node-record.ts --node node-1 --ctr BIN --address SOCK --kubelet-log FILE --out FILE
import { execFile, spawn } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { createInterface } from 'node:readline';
import { parseArgs, promisify } from 'node:util';
import type { NodeEvent } from './lib/node-events.js';
import { parseContainerdEvent, parseKubeletStop, parseProcStat } from './lib/node-events.js';

const run = promisify(execFile);
const { values: opts } = parseArgs({
  options: {
    node: { type: 'string' },
    ctr: { type: 'string' },
    address: { type: 'string' },
    'kubelet-log': { type: 'string' },
    out: { type: 'string' },
  },
});
function required(name: keyof typeof opts): string {
  const v = opts[name];
  if (!v) throw new Error(`node-record: --${name} is required (--node --ctr --address --kubelet-log --out)`);
  return v;
}
const node = required('node'),
  ctr = required('ctr'),
  address = required('address'),
  out = required('out');
const kubeletLog = required('kubelet-log');

const write = (e: NodeEvent): void => appendFileSync(out, `${JSON.stringify(e)}\n`);

/** runc reports a process killed by signal N as exit status 128 + N: name the signal, as a child's exit does. */
const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [128 + n, name]));
const exitOf = (code: number): Pick<NodeEvent, 'exitCode' | 'signal'> =>
  SIGNALS.has(code) ? { exitCode: null, signal: SIGNALS.get(code) } : { exitCode: code, signal: null };

/** Pod, namespace and container of a CRI container, from its labels, looked up once when containerd creates it. */
interface Owner {
  namespace: string;
  pod: string;
  uid: string;
  container?: string;
}
const owners = new Map<string, Promise<Owner | undefined>>();
function ownerOf(id: string): Promise<Owner | undefined> {
  let o = owners.get(id);
  if (!o) {
    o = run(ctr, ['--address', address, '-n', 'k8s.io', 'containers', 'info', id], { maxBuffer: 16 << 20 })
      .then(({ stdout }) => {
        const labels = (JSON.parse(stdout) as { Labels?: Record<string, string> }).Labels ?? {};
        const pod = labels['io.kubernetes.pod.name'];
        if (!pod) return undefined;
        return {
          namespace: labels['io.kubernetes.pod.namespace'] ?? '',
          pod,
          uid: labels['io.kubernetes.pod.uid'] ?? '',
          container: labels['io.kubernetes.container.name'],
        };
      })
      .catch(() => {
        owners.delete(id); // containerd unreachable for a moment (restarting): ask again next time
        return undefined;
      });
    owners.set(id, o);
  }
  return o;
}

/** A task that runs, by container id: its owner and its process (pid and /proc start time, against pid reuse). */
interface Running {
  owner: Owner;
  pid: number;
  startTime: string | undefined;
  /** When its process was first seen exited (a zombie) or gone, while watched closely after its stop signal. */
  goneSeen?: string;
}
const running = new Map<string, Running>();
/** Containers whose exit is written: containerd may report it again after a restart; a second exit would be false. */
const exitWritten = new Set<string>();

function procStat(pid: number): ReturnType<typeof parseProcStat> {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}

const isGone = (r: Running): boolean => {
  const now = procStat(r.pid);
  return !now || now.state === 'Z' || (r.startTime !== undefined && now.startTime !== r.startTime);
};

function writeExit(id: string, owner: Owner, pid: number | undefined, t: string, fields: Partial<NodeEvent>): void {
  running.delete(id);
  if (exitWritten.has(id)) return;
  exitWritten.add(id);
  const sandbox = owner.container === undefined;
  write({
    t,
    node,
    namespace: owner.namespace,
    pod: owner.pod,
    uid: owner.uid,
    ...(sandbox ? {} : { container: owner.container }),
    event: sandbox ? 'pod-stopped' : 'container-exited',
    ...(pid !== undefined ? { pid } : {}),
    ...fields,
  });
}

/**
 * While containerd's event stream is down (containerd restarting: a fault the tests inject), a container that exits
 * is in no event: containerd does not tell a later subscriber. The kernel knows: every 50 ms, each running task's
 * process is looked up in /proc, and one that is gone (or a zombie, or a new process under its pid) is written as
 * exited, at the time it was seen gone.
 */
const PROC_POLL_MS = 50;
let procPoll: NodeJS.Timeout | undefined;
function watchProc(on: boolean): void {
  if (!on) {
    clearInterval(procPoll);
    procPoll = undefined;
    return;
  }
  procPoll ??= setInterval(() => {
    for (const [id, r] of running) if (isGone(r)) writeExit(id, r.owner, r.pid, r.goneSeen ?? new Date().toISOString(), { source: 'proc' });
  }, PROC_POLL_MS);
}

/**
 * containerd stamps an exit late: its shim sets the time when it handles the exit (containerd v2.4, the runc
 * shim's `handleProcessExit` → `setExited`: time.Now()), after reaping the process, reading the bundle's
 * config.json and handling the pod's earlier exits one by one — later than the kernel by an amount that grows with
 * load. Anything that acts on the kernel's view (the node witness reads pids.current, which drops at the reap) can
 * then look earlier than the death it followed. So from the kubelet's stop signal until the exit, the container's
 * process is looked up every 5 ms (18 µs a lookup here), and the record keeps the earlier of the two times: the
 * process seen a zombie or gone (never before it exited, at most a poll late) or containerd's.
 */
const STOP_POLL_MS = 5;
// A process still there after this long is left to containerd's time (which then matters less): a standby that
// waits out its grace period would otherwise cost a core's few percent, in the middle of a measurement.
const STOP_WATCH_MS = 3_000;
/** Container id → when its close watch ends. */
const stopping = new Map<string, number>();
let stopPoll: NodeJS.Timeout | undefined;
function watchStop(namespace: string, pod: string, container: string): void {
  for (const [id, r] of running)
    if (r.owner.namespace === namespace && r.owner.pod === pod && r.owner.container === container && r.goneSeen === undefined)
      stopping.set(id, Date.now() + STOP_WATCH_MS);
  if (stopping.size === 0 || stopPoll) return;
  stopPoll = setInterval(() => {
    for (const [id, until] of stopping) {
      const r = running.get(id);
      if (r && !isGone(r)) {
        if (Date.now() > until) stopping.delete(id);
        continue;
      }
      if (r) r.goneSeen = new Date().toISOString();
      stopping.delete(id);
    }
    if (stopping.size === 0) {
      clearInterval(stopPoll);
      stopPoll = undefined;
    }
  }, STOP_POLL_MS);
}

// containerd's event stream; when containerd restarts the stream ends: subscribe again, and watch /proc until the
// new subscription has stayed up for a second (a ctr that cannot connect exits at once).
function subscribe(): void {
  watchProc(true);
  const events = spawn(ctr, ['--address', address, '-n', 'k8s.io', 'events'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const up = setTimeout(() => watchProc(false), 1_000);
  events.on('exit', (code) => {
    clearTimeout(up);
    watchProc(true);
    console.error(`node-record ${node}: ctr events exited (${code}); subscribing again`);
    setTimeout(subscribe, 200);
  });
  createInterface({ input: events.stdout }).on('line', (line) => {
    const e = parseContainerdEvent(line);
    if (!e) return;
    // Ask for the owner at creation, while the container surely exists; later events reuse the answer.
    const owner = ownerOf(e.containerId);
    if (e.kind === 'created') return;
    void owner.then((o) => {
      if (!o) return;
      if (e.kind === 'exited') {
        const r = running.get(e.containerId);
        const seen = r?.goneSeen;
        const earlier = seen !== undefined && Date.parse(seen) < Date.parse(e.t);
        const code = e.exitCode !== undefined ? exitOf(e.exitCode) : {};
        writeExit(e.containerId, o, e.pid ?? r?.pid, earlier ? seen : e.t, earlier ? { ...code, source: 'proc', containerdAt: e.t } : code);
        return;
      }
      const sandbox = o.container === undefined;
      if (e.pid !== undefined) running.set(e.containerId, { owner: o, pid: e.pid, startTime: procStat(e.pid)?.startTime });
      write({
        t: e.t,
        node,
        namespace: o.namespace,
        pod: o.pod,
        uid: o.uid,
        ...(sandbox ? {} : { container: o.container }),
        event: sandbox ? 'pod-started' : 'container-started',
        ...(e.pid !== undefined ? { pid: e.pid } : {}),
      });
    });
  });
}
subscribe();

// The kubelet's log, followed from its current end: every "Killing container with a grace period" line.
let offset = existsSync(kubeletLog) ? statSync(kubeletLog).size : 0;
let partial = '';
setInterval(() => {
  if (!existsSync(kubeletLog)) return;
  const size = statSync(kubeletLog).size;
  if (size < offset) offset = 0; // a new log
  if (size === offset) return;
  const fd = openSync(kubeletLog, 'r');
  const buf = Buffer.alloc(size - offset);
  readSync(fd, buf, 0, buf.length, offset);
  closeSync(fd);
  offset = size;
  const lines = (partial + buf.toString('utf8')).split('\n');
  partial = lines.pop() ?? '';
  for (const l of lines) {
    const stop = parseKubeletStop(l, new Date());
    if (!stop) continue;
    write({ ...stop, node, event: 'signal', signal: 'SIGTERM' });
    if (stop.container) watchStop(stop.namespace, stop.pod, stop.container);
  }
}, 50);
