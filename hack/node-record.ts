// The node's own record of its containers, for tests and benchmarks (never for the operator): what the node's
// runtime (containerd, or CRI-O) says happened to each container (started, exited, with exit code and time) and when
// the kubelet sent a container its stop signal, read from the kubelet's log. One process per real node
// (hack/nodes.sh starts it); it appends one JSON line per event to --out, in the shape `nodeEvents()`
// (hack/lib/cluster.ts) returns.
//   node-record.ts --node node-1 [--runtime containerd] --ctr BIN --address SOCK --kubelet-log FILE --out FILE
//   node-record.ts --node node-2 --runtime crio --crictl BIN --address SOCK --kubelet-log FILE --out FILE
import { execFile, spawn } from 'node:child_process';
import { appendFileSync, closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { parseArgs, promisify } from 'node:util';
import type { NodeEvent, Owner, RuntimeEvent } from './lib/node-events.js';
import { jsonObjectSplitter, parseCrictlInspectPid, parseCrioEvent } from './lib/crio-events.js';
import { exitTime, parseContainerdEvent, parseKubeletStop, parseProcStat } from './lib/node-events.js';

const run = promisify(execFile);
const { values: opts } = parseArgs({
  options: {
    node: { type: 'string' },
    runtime: { type: 'string', default: 'containerd' },
    ctr: { type: 'string' },
    crictl: { type: 'string' },
    address: { type: 'string' },
    'kubelet-log': { type: 'string' },
    out: { type: 'string' },
  },
});
if (opts.runtime !== 'containerd' && opts.runtime !== 'crio') throw new Error(`node-record: --runtime ${opts.runtime}: containerd or crio`);
const runtime: 'containerd' | 'crio' = opts.runtime;
const client = runtime === 'crio' ? 'crictl' : 'ctr';
function required(name: keyof typeof opts): string {
  const v = opts[name];
  if (!v) throw new Error(`node-record: --${name} is required (--node [--runtime containerd] --${client} --address --kubelet-log --out)`);
  return v;
}
const node = required('node'),
  clientBin = required(client),
  address = required('address'),
  out = required('out');
const kubeletLog = required('kubelet-log');

const write = (e: NodeEvent): void => appendFileSync(out, `${JSON.stringify(e)}\n`);

/** runc (and conmon) report a process killed by signal N as exit status 128 + N: name the signal, as a child's exit does. */
const SIGNALS = new Map(Object.entries(constants.signals).map(([name, n]) => [128 + n, name]));
const exitOf = (code: number): Pick<NodeEvent, 'exitCode' | 'signal'> =>
  SIGNALS.has(code) ? { exitCode: null, signal: SIGNALS.get(code) } : { exitCode: code, signal: null };

/** A task that runs, by container id: its owner and its process (pid and /proc start time, against pid reuse). */
interface Running {
  owner: Owner;
  pid: number;
  startTime: string | undefined;
  /** When its process was first seen exited (a zombie) or gone, while watched closely after its stop signal. */
  goneSeen?: string;
}
const running = new Map<string, Running>();
/** Containers whose exit is written: the runtime may report it again (after a restart, or twice for a sandbox). */
const exitWritten = new Set<string>();
/** Containers whose start is written, for the same reason. */
const startWritten = new Set<string>();

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

const ownerFields = (o: Owner): Pick<NodeEvent, 'namespace' | 'pod' | 'uid' | 'container'> => ({
  namespace: o.namespace,
  pod: o.pod,
  uid: o.uid,
  ...(o.container === undefined ? {} : { container: o.container }),
});

function recordStart(id: string, owner: Owner, t: string, pid: number | undefined): void {
  if (startWritten.has(id)) return;
  startWritten.add(id);
  if (pid !== undefined) running.set(id, { owner, pid, startTime: procStat(pid)?.startTime });
  write({ t, node, ...ownerFields(owner), event: owner.container === undefined ? 'pod-started' : 'container-started', ...(pid !== undefined ? { pid } : {}) });
}

function writeExit(id: string, owner: Owner, pid: number | undefined, t: string, fields: Partial<NodeEvent>): void {
  running.delete(id);
  if (exitWritten.has(id)) return;
  exitWritten.add(id);
  write({
    t,
    node,
    ...ownerFields(owner),
    event: owner.container === undefined ? 'pod-stopped' : 'container-exited',
    ...(pid !== undefined ? { pid } : {}),
    ...fields,
  });
}

/** An exit the runtime reports, at the earlier of its time and the one /proc showed (watchStop): exitTime. */
function recordExit(id: string, owner: Owner, e: RuntimeEvent): void {
  const r = running.get(id);
  const code = e.exitCode !== undefined ? exitOf(e.exitCode) : {};
  const { t, ...how } = exitTime(runtime, e.t, r?.goneSeen);
  writeExit(id, owner, e.pid ?? r?.pid, t, { ...code, ...how });
}

/**
 * While the runtime's event stream is down (the runtime restarting: a fault the tests inject), a container that exits
 * is in no event: neither containerd nor CRI-O tells a later subscriber. The kernel knows: every 50 ms, each running
 * task's process is looked up in /proc, and one that is gone (or a zombie, or a new process under its pid) is written
 * as exited, at the time it was seen gone.
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
 * Runtimes stamp an exit late. containerd's shim sets the time when it handles the exit (containerd v2.4, the runc
 * shim's `handleProcessExit` → `setExited`: time.Now()), after reaping the process, reading the bundle's config.json
 * and handling the pod's earlier exits one by one. CRI-O's is the change time of the exit file conmon writes after
 * reaping the process, draining its output and syncing its log (parseCrioEvent). Both are later than the kernel by
 * an amount that grows with load (CRI-O's, a coarse file time, can also be up to a tick early). Anything
 * that acts on the kernel's view (the node witness reads pids.current, which drops at the reap) can then look
 * earlier than the death it followed. So from the kubelet's stop signal until the exit, the container's process is
 * looked up every 5 ms (18 µs a lookup here), and the record keeps the earlier of the two times (exitTime): the
 * process seen a zombie or gone (never before it exited) or the runtime's.
 */
const STOP_POLL_MS = 5;
// A process still there after this long is left to the runtime's time (which then matters less): a standby that
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

/**
 * The runtime's event stream, from its client's output; when the runtime restarts the stream ends: subscribe
 * again, and watch /proc until the new subscription has stayed up for a second (a client that cannot connect exits
 * at once: ctr, and crictl, which asks the runtime its version before it subscribes).
 */
function follow(args: string[], read: (stdout: Readable) => void): void {
  watchProc(true);
  // Killed with this process (nodes.sh stops it with SIGKILL): an orphaned subscriber would outlive it, and double
  // a restarted record's.
  const events = spawn('setpriv', ['--pdeathsig', 'TERM', '--', clientBin, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const up = setTimeout(() => watchProc(false), 1_000);
  events.on('exit', (code) => {
    clearTimeout(up);
    watchProc(true);
    console.error(`node-record ${node}: ${client} events exited (${code}); subscribing again`);
    setTimeout(() => follow(args, read), 200);
  });
  read(events.stdout);
}

/** containerd: `ctr events`, one line an event, owners from the container's labels (`ctr containers info`). */
function followContainerd(): void {
  const owners = new Map<string, Promise<Owner | undefined>>();
  const ownerOf = (id: string): Promise<Owner | undefined> => {
    let o = owners.get(id);
    if (!o) {
      o = run(clientBin, ['--address', address, '-n', 'k8s.io', 'containers', 'info', id], { maxBuffer: 16 << 20 })
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
  };
  follow(['--address', address, '-n', 'k8s.io', 'events'], (stdout) =>
    createInterface({ input: stdout }).on('line', (line) => {
      const e = parseContainerdEvent(line);
      if (!e) return;
      // Ask for the owner at creation, while the container surely exists; later events reuse the answer.
      const owner = ownerOf(e.containerId);
      if (e.kind === 'created') return;
      void owner.then((o) => {
        if (!o) return;
        if (e.kind === 'exited') recordExit(e.containerId, o, e);
        else recordStart(e.containerId, o, e.t, e.pid);
      });
    }),
  );
}

/**
 * CRI-O: `crictl events -o json` (CRI GetContainerEvents; crio needs enable_pod_events), events that carry their
 * owner but no pid: the pid is asked of `crictl inspect` at the start. A container's events are handled in order, so
 * its exit never overtakes its start's pid lookup.
 */
function followCrio(): void {
  const crictl = ['-c', '/dev/null', '--runtime-endpoint', `unix://${address}`]; // no config file: no warning each call
  const pidOf = (id: string, sandbox: boolean): Promise<number | undefined> =>
    run(clientBin, [...crictl, sandbox ? 'inspectp' : 'inspect', '-o', 'json', id], { maxBuffer: 16 << 20 })
      .then(({ stdout }) => parseCrictlInspectPid(stdout)) // none for a sandbox without an infra process
      .catch(() => undefined); // gone already, or crio restarting: the exit still comes as an event
  const queues = new Map<string, Promise<void>>();
  follow([...crictl, 'events', '-o', 'json'], (stdout) => {
    const split = jsonObjectSplitter(); // one per subscription: an event cut by a restart is not glued to the next
    stdout.setEncoding('utf8').on('data', (chunk: string) => {
      for (const text of split(chunk)) {
        const e = parseCrioEvent(text);
        if (!e || e.kind === 'created') continue;
        const id = e.containerId;
        const handled = (queues.get(id) ?? Promise.resolve()).then(async () => {
          if (e.kind === 'exited') return recordExit(id, e.owner, e);
          if (!startWritten.has(id)) recordStart(id, e.owner, e.t, await pidOf(id, e.owner.container === undefined));
        });
        queues.set(id, handled);
        void handled.finally(() => queues.get(id) === handled && queues.delete(id));
      }
    });
  });
}

if (runtime === 'crio') followCrio();
else followContainerd();

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
