// Process-level "containers": a pod sandbox is a sleeping process in its own UTS namespace (hostname = pod
// name, or node name for hostNetwork pods); each container runs inside that UTS namespace and in a mount
// namespace of its own in which its volumes are bind-mounted at their mountPaths.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { openSync, closeSync, readlinkSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Sandbox {
  pid: number;
  process: ChildProcess;
}

/** Starts the sandbox and resolves once its hostname is set inside its own UTS namespace. */
export async function startSandbox(hostname: string, env: Record<string, string>): Promise<Sandbox> {
  const child = spawn('unshare', ['--uts', '--', '/bin/sh', '-c', 'hostname "$0" && echo ready && exec sleep infinity', hostname], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not start pod sandbox (unshare)');
  await new Promise<void>((resolve, reject) => {
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout?.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`pod sandbox exited (${code}): ${stderr.trim()}`)));
  });
  // Never let a container join the host's UTS namespace: it would rename the machine.
  if (readlinkSync(`/proc/${pid}/ns/uts`) === readlinkSync('/proc/self/ns/uts')) {
    child.kill('SIGKILL');
    throw new Error('pod sandbox did not get its own UTS namespace');
  }
  const { stdout } = await run('nsenter', ['--target', String(pid), '--uts', 'hostname']);
  if (stdout.trim() !== hostname) throw new Error(`pod sandbox hostname is ${stdout.trim()}, want ${hostname}`);
  return { pid, process: child };
}

export interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
}

export interface ContainerLaunch {
  sandboxPid: number;
  binary: string;
  argv: string[];
  env: Map<string, string>;
  mounts: Mount[];
  logFile: string;
}

// Runs inside the new mount namespace: create the mount points, bind the volumes, then exec the binary so
// the container's pid is the binary's pid and signals reach it directly.
const MOUNT_SCRIPT = `
set -e
while [ "$1" != "--" ]; do
  src="$1"; dst="$2"; ro="$3"; shift 3
  mkdir -p "$dst"
  mount --bind "$src" "$dst"
  if [ "$ro" = ro ]; then mount -o remount,bind,ro "$dst"; fi
done
shift
exec "$@"
`;

export function launchContainer(l: ContainerLaunch): ChildProcess {
  const mountArgs = l.mounts.flatMap((m) => [m.source, m.target, m.readOnly ? 'ro' : 'rw']);
  const fd = openSync(l.logFile, 'a');
  try {
    return spawn(
      'nsenter',
      [
        '--target', String(l.sandboxPid), '--uts', '--',
        'unshare', '--mount', '--propagation', 'private', '--',
        '/bin/sh', '-c', MOUNT_SCRIPT, 'container', ...mountArgs, '--', l.binary, ...l.argv,
      ],
      { env: Object.fromEntries(l.env), stdio: ['ignore', fd, fd] },
    );
  } finally {
    closeSync(fd);
  }
}
