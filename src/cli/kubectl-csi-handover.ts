// `kubectl csi-handover`: a kubectl plugin that shows what the operator recorded about a driver's lease
// handovers. It reads through kubectl itself (so every kubeconfig, context and credential plugin works) and
// only what the operator already writes: the ClusterCSIDriver, its CSIHandoverReport and its Events.
//
//   kubectl csi-handover status <driver>               conditions, the last rollout per lease, recent Events
//   kubectl csi-handover timeline <driver> [--svg F]   the last rollout's lease holders over time
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { REPORT_GROUP, REPORT_RESOURCE } from '../api/handover-report.js';
import { renderTimeline } from '../report/timeline-svg.js';
import { driverReport, formatStatus, formatTimeline, parseDriver, parseEvents, timelineSvgInput } from './status-view.js';

const USAGE = `Usage:
  kubectl csi-handover status <driver>              conditions, last rollout per lease (old → new holder, gap, who released), recent events
  kubectl csi-handover timeline <driver> [--svg F]  the last rollout's lease-holder timeline; --svg writes it as a picture
Options: --kubeconfig FILE, --context NAME (passed to kubectl; KUBECTL names the kubectl binary)
`;

export type Kubectl = (args: string[]) => Promise<string>;

interface Args {
  command: 'status' | 'timeline';
  driver: string;
  svg?: string;
  kubectlFlags: string[];
}

export function parseArgs(argv: readonly string[]): Args {
  const positional: string[] = [];
  const kubectlFlags: string[] = [];
  let svg: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    const [flag, inline] = a.startsWith('--') ? [a.split('=')[0] ?? '', a.includes('=') ? a.slice(a.indexOf('=') + 1) : undefined] : ['', undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new UsageError(`${flag} needs a value`);
      return v;
    };
    if (flag === '--svg') svg = value();
    else if (flag === '--kubeconfig' || flag === '--context') kubectlFlags.push(`${flag}=${value()}`);
    else if (flag === '--help' || a === '-h') throw new UsageError('');
    else if (a.startsWith('-')) throw new UsageError(`unknown flag ${a}`);
    else positional.push(a);
  }
  const [command, driver, ...rest] = positional;
  if (command !== 'status' && command !== 'timeline') throw new UsageError(command ? `unknown command ${command}` : '');
  if (!driver) throw new UsageError(`${command} needs a driver name (a ClusterCSIDriver, e.g. hostpath.csi.k8s.io)`);
  if (rest.length) throw new UsageError(`unexpected ${rest.join(' ')}`);
  if (svg !== undefined && command !== 'timeline') throw new UsageError('--svg goes with timeline');
  return { command, driver, svg, kubectlFlags };
}

export class UsageError extends Error {}

export async function run(argv: readonly string[], kubectl: Kubectl, out: (s: string) => void, now = Date.now()): Promise<void> {
  const args = parseArgs(argv);
  const k = (rest: string[]) => kubectl([...args.kubectlFlags, ...rest]);
  const driver = parseDriver(JSON.parse(await k(['get', 'clustercsidrivers.operator.openshift.io', args.driver, '-o', 'json'])));
  // None yet (no handover), or its CRD not installed: no report, said as such.
  const reportJson = await k(['get', `${REPORT_RESOURCE}.${REPORT_GROUP}`, args.driver, '-o', 'json', '--ignore-not-found']).then(
    (text) => (text.trim() ? (JSON.parse(text) as unknown) : undefined),
    (err: unknown) => {
      if (/the server doesn't have a resource type/i.test(String(err))) return undefined;
      throw err;
    },
  );
  const report = driverReport(driver, reportJson);
  if (args.command === 'status') {
    // The operator writes a cluster-scoped object's Events to "default", as client-go does.
    const events = parseEvents(
      JSON.parse(
        await k(['get', 'events', '-n', 'default', '-o', 'json', `--field-selector=involvedObject.kind=ClusterCSIDriver,involvedObject.name=${args.driver}`]),
      ),
    );
    out(formatStatus(driver, report, events, now));
    return;
  }
  out(formatTimeline(args.driver, report));
  if (args.svg !== undefined) {
    if (!report) throw new Error(`no handover recorded for ${args.driver}: no picture written`);
    writeFileSync(args.svg, renderTimeline(timelineSvgInput(args.driver, report)));
    out(`wrote ${args.svg}\n`);
  }
}

const execKubectl: Kubectl = async (args) => {
  try {
    return (await promisify(execFile)(process.env.KUBECTL || 'kubectl', args, { maxBuffer: 64 * 1024 * 1024 })).stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error((e.stderr?.trim() || e.message).replace(/^error: /, ''), { cause: err });
  }
};

if (import.meta.url === `file://${process.argv[1]}`) {
  run(process.argv.slice(2), execKubectl, (s) => process.stdout.write(s)).catch((err: unknown) => {
    if (err instanceof UsageError) {
      if (err.message) process.stderr.write(`error: ${err.message}\n`);
      process.stderr.write(USAGE);
      process.exit(err.message ? 2 : 0);
    }
    process.stderr.write(`error: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
