// What a local cluster with real nodes could change on this machine, read in one go so a test can compare the
// host before `cluster-up` with the host after `cluster-down`: processes, mounts, network namespaces, links,
// routes, iptables rules, top-level cgroups, the kernel settings the kubelet and CNI write, and the paths
// kubelet, containerd, CRI-O and CNI use by default.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface HostState {
  processes: string[];
  mounts: string[];
  netns: string[];
  links: string[];
  routes: string[];
  iptables: string[];
  cgroups: string[];
  sysctls: string[];
  paths: string[];
}

/** The cgroup (and bridge) name prefix hack/nodes.sh derives from a cluster's state directory. */
export const clusterCgroupPrefix = (stateDir: string): string => `csi-handover-${createHash('sha256').update(`${stateDir}\n`).digest('hex').slice(0, 6)}`;

export const KERNEL_SETTINGS = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
  'net/ipv4/ip_forward',
  'net/ipv4/conf/all/route_localnet',
  'net/bridge/bridge-nf-call-iptables',
];

const DEFAULT_PATHS = [
  '/var/lib/kubelet',
  '/var/log/pods',
  '/var/log/containers',
  '/var/lib/cni',
  '/etc/cni',
  '/opt/cni',
  '/run/containerd',
  '/var/lib/containerd',
  '/opt/containerd',
  '/run/netns',
  '/var/run/netns',
  '/etc/containerd',
  // CRI-O's, conmon's and containers/storage's defaults (the CRI-O node keeps all of them in its own namespaces).
  '/run/containers',
  '/var/run/containers',
  '/var/lib/containers',
  '/etc/containers',
  '/run/crio',
  '/var/run/crio',
  '/var/lib/crio',
  '/var/log/crio',
  '/etc/crio',
  '/run/runc',
  '/var/lib/csi-hostpath-data',
  '/run/nri',
  '/var/run/nri',
  '/etc/cdi',
  '/var/run/cdi',
  // hack/nodes.sh's own registry of the host's clusters and the kernel settings they changed.
  '/run/csi-handover',
  '/run/csi-handover/host-sysctls',
];

const lines = (s: string): string[] =>
  s
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);

async function command(file: string, args: string[]): Promise<string[]> {
  try {
    return lines((await run(file, args)).stdout);
  } catch (err) {
    return [`${file} ${args.join(' ')} failed: ${(err as Error).message}`];
  }
}

/** A cluster's processes: every one that names its state directory (control plane, kubelet, containerd, shims)
 * or runs in its nodes' cgroups (pods). Another cluster on the machine does not count. */
function processes(stateDirs: string[]): string[] {
  const out: string[] = [];
  const prefixes = stateDirs.map((d) => `:/${clusterCgroupPrefix(d)}-`);
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const cgroup = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
      if (stateDirs.some((d) => cmdline.includes(d)) || prefixes.some((p) => cgroup.includes(p))) out.push(`${pid} ${comm}`);
    } catch {
      // exited while we looked
    }
  }
  return out.sort();
}

function cgroups(): string[] {
  const out: string[] = [];
  for (const hierarchy of readdirSync('/sys/fs/cgroup')) {
    try {
      for (const e of readdirSync(`/sys/fs/cgroup/${hierarchy}`, { withFileTypes: true })) {
        if (e.isDirectory()) out.push(`${hierarchy}/${e.name}`);
      }
    } catch {
      // not a hierarchy
    }
  }
  return out.sort();
}

function sysctls(): string[] {
  return KERNEL_SETTINGS.map((k) => {
    try {
      return `${k}=${readFileSync(`/proc/sys/${k}`, 'utf8').trim()}`;
    } catch {
      return `${k} unreadable`;
    }
  });
}

/** The host as seen from the init namespaces; `stateDirs`: the clusters (state directories) whose processes count. */
export async function hostState(stateDirs: string[]): Promise<HostState> {
  const [links, routes, iptables] = await Promise.all([
    command('ip', ['-o', 'link', 'show']).then((ls) => ls.map((l) => l.split(':')[1]?.trim() ?? l).sort()),
    command('ip', ['route', 'show', 'table', 'all']),
    // Rules, not counters: drop the packet counts and the save/commit comments.
    command('iptables-save', []).then((ls) => ls.filter((l) => !l.startsWith('#')).map((l) => l.replace(/\[\d+:\d+\]/g, ''))),
  ]);
  return {
    processes: processes(stateDirs),
    mounts: lines(readFileSync('/proc/1/mounts', 'utf8')).sort(),
    netns: existsSync('/run/netns') ? readdirSync('/run/netns').sort() : [],
    links,
    routes: routes.sort(),
    iptables,
    cgroups: cgroups(),
    sysctls: sysctls(),
    paths: DEFAULT_PATHS.filter((p) => existsSync(p)),
  };
}
