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
    for (const [id, r] of running) {
      const now = procStat(r.pid);
      if (!now || now.state === 'Z' || (r.startTime !== undefined && now.startTime !== r.startTime))
        writeExit(id, r.owner, r.pid, new Date().toISOString(), { source: 'proc' });
    }
  }, PROC_POLL_MS);
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
        writeExit(e.containerId, o, e.pid ?? running.get(e.containerId)?.pid, e.t, e.exitCode !== undefined ? exitOf(e.exitCode) : {});
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
    if (stop) write({ ...stop, node, event: 'signal', signal: 'SIGTERM' });
  }
}, 50);
