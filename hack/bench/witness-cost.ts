// make bench-witness: what the node witness costs on each node — its process's resident memory and CPU time,
// read from the host's /proc (the local nodes' processes are the host's), idle for WITNESS_IDLE_S seconds and
// then through log-level rollouts of the sample driver (its leaders deleted, the witness polling their cgroups).
import { readdirSync, readFileSync } from 'node:fs';
import { PatchType } from '../../src/kube/http.js';
import { clusterHttp, deploySample } from '../lib/cluster.js';
import { installOperator, installWitness, SAMPLE_CR_PATH, setOperatorMode, setSampleCrLevel, settledSample } from '../lib/operator.js';

const http = clusterHttp();
const idleS = Number(process.env.WITNESS_IDLE_S ?? 60);
const rollouts = Number(process.env.WITNESS_ROLLOUTS ?? 3);
const TICK_MS = 10; // USER_HZ 100: /proc/<pid>/stat times are in 1/100 s

interface Sample {
  pid: number;
  rssKiB: number;
  cpuMs: number;
}

/** Every witness process on the host: `node dist/src/main.js witness [flags]`. */
function witnesses(): Sample[] {
  const out: Sample[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      // The subcommand follows the script; flags may follow it (--operator-namespace).
      const script = cmd.findIndex((a) => a.endsWith('main.js'));
      if (script < 0 || cmd[script + 1] !== 'witness') continue;
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${d}/status`, 'utf8'))?.[1];
      // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(d), rssKiB: Number(rss ?? 0), cpuMs: (Number(f[11]) + Number(f[12])) * TICK_MS });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function report(what: string, before: Sample[], after: Sample[], seconds: number): void {
  for (const a of after) {
    const b = before.find((x) => x.pid === a.pid);
    const cpu = b ? a.cpuMs - b.cpuMs : NaN;
    console.log(
      `${what.padEnd(28)} pid ${String(a.pid).padStart(7)}: RSS ${(a.rssKiB / 1024).toFixed(1)} MiB, CPU ${cpu} ms in ${seconds.toFixed(0)} s (${((cpu / (seconds * 1000)) * 100).toFixed(2)}% of a core)`,
    );
  }
}

await installOperator(http);
await setOperatorMode(http, 'standalone');
await deploySample('openshift');
await setSampleCrLevel(http, 'Normal');
await installWitness(http);
await settledSample(http);
let before = witnesses();
if (before.length === 0) throw new Error('no witness process found on this host');
await new Promise((r) => setTimeout(r, idleS * 1000));
report('idle', before, witnesses(), idleS);

before = witnesses();
const started = Date.now();
for (let i = 0; i < rollouts; i++) {
  await http.patch(SAMPLE_CR_PATH, { spec: { logLevel: i % 2 === 0 ? 'Debug' : 'Normal' } }, PatchType.merge);
  await new Promise((r) => setTimeout(r, 2000));
  await settledSample(http);
}
report(`${rollouts} rollouts`, before, witnesses(), (Date.now() - started) / 1000);
