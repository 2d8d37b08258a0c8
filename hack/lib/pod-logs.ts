// Follows the containers' log files on the real nodes (each node's /var/log/pods, kept under the state
// directory) and keeps every line it read, so a test can read what a pod logged even after the kubelet removed
// the pod and its logs. Lines are in the CRI log format: `<time> <stream> <P|F> <text>` (P: a partial line);
// a joined line keeps the time of its first part (when the kubelet's runtime read it from the container).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { localDir } from './cluster.js';

/** One CRI log line → its time (ms since epoch), its text, and whether it ends the line (F) or continues (P). */
export function parseCriLogLine(line: string): { t: number; text: string; full: boolean } | undefined {
  const m = /^(\S+) (?:stdout|stderr) ([PF]) (.*)$/.exec(line);
  const t = m ? Date.parse(m[1] ?? '') : Number.NaN;
  return m && !Number.isNaN(t) ? { t, text: m[3] ?? '', full: m[2] === 'F' } : undefined;
}

export interface LogEntry {
  /** ms since epoch, the CRI log time */
  t: number;
  text: string;
}

export class PodLogFollower {
  private readonly offsets = new Map<string, number>();
  private readonly partial = new Map<string, LogEntry>();
  private readonly logged = new Map<string, LogEntry[]>();
  private timer: NodeJS.Timeout | undefined;

  /** `namespace`: whose pods to follow; `container`: which container of each. */
  constructor(
    private readonly namespace: string,
    private readonly container: string,
  ) {}

  start(intervalMs = 200): void {
    this.timer = setInterval(() => this.poll(), intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
    this.poll();
  }

  /** Every complete line the container of `pod` logged, across restarts, in order. */
  lines(pod: string): string[] {
    return this.entries(pod).map((e) => e.text);
  }

  /** The same lines with their times. */
  entries(pod: string): LogEntry[] {
    this.poll();
    return this.logged.get(pod) ?? [];
  }

  pods(): string[] {
    this.poll();
    return [...this.logged.keys()];
  }

  private poll(): void {
    const nodes = join(localDir, 'nodes');
    for (const node of existsSync(nodes) ? readdirSync(nodes) : []) {
      const pods = join(nodes, node, 'var-log', 'pods');
      if (!existsSync(pods)) continue;
      for (const dir of readdirSync(pods)) {
        const [ns, pod] = dir.split('_');
        if (ns !== this.namespace || !pod) continue;
        const cdir = join(pods, dir, this.container);
        let files: string[];
        try {
          files = readdirSync(cdir)
            .filter((f) => f.endsWith('.log'))
            .sort((a, b) => Number.parseInt(a) - Number.parseInt(b));
        } catch {
          continue; // removed between the listing and now
        }
        for (const f of files) this.read(pod, join(cdir, f));
      }
    }
  }

  private read(pod: string, file: string): void {
    let text: string;
    try {
      const from = this.offsets.get(file) ?? 0;
      if (statSync(file).size <= from) return;
      text = readFileSync(file).subarray(from).toString('utf8');
    } catch {
      return;
    }
    const end = text.lastIndexOf('\n');
    if (end < 0) return;
    this.offsets.set(file, (this.offsets.get(file) ?? 0) + Buffer.byteLength(text.slice(0, end + 1)));
    const out = this.logged.get(pod) ?? [];
    for (const raw of text.slice(0, end).split('\n')) {
      const l = parseCriLogLine(raw);
      if (!l) continue;
      const before = this.partial.get(file);
      const joined = { t: before?.t ?? l.t, text: (before?.text ?? '') + l.text };
      if (l.full) {
        out.push(joined);
        this.partial.delete(file);
      } else {
        this.partial.set(file, joined);
      }
    }
    this.logged.set(pod, out);
  }
}
