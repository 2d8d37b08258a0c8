// A real Prometheus (Debian's build, from make bins) on the host for the alert tests: it scrapes the targets
// it is given every second and evaluates the shipped rules every second. Debian builds Prometheus without
// Kubernetes service discovery, so the caller lists the operator's pods (file-based discovery, re-read at once).
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { binDir, waitFor } from './cluster.js';

export interface ActiveAlert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
}

export class LocalPrometheus {
  private constructor(
    private readonly proc: ChildProcess,
    private readonly dir: string,
    readonly url: string,
    private readonly output: string[],
  ) {}

  /** Starts Prometheus with these rule groups; resolves once it is ready. */
  static async start(ruleGroups: unknown[]): Promise<LocalPrometheus> {
    const dir = mkdtempSync(join(tmpdir(), 'csi-handover-prometheus-'));
    writeFileSync(join(dir, 'targets.json'), '[]');
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups: ruleGroups }));
    writeFileSync(
      join(dir, 'prometheus.yaml'),
      stringify({
        global: { scrape_interval: '1s', scrape_timeout: '900ms', evaluation_interval: '1s' },
        rule_files: [join(dir, 'rules.yaml')],
        scrape_configs: [
          {
            job_name: 'csi-handover',
            file_sd_configs: [{ files: [join(dir, 'targets.json')], refresh_interval: '1s' }],
          },
        ],
      }),
    );
    const port = await freePort();
    const output: string[] = [];
    const proc = spawn(
      join(binDir, 'prometheus'),
      [
        `--config.file=${join(dir, 'prometheus.yaml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (b: Buffer) => output.push(b.toString());
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    const p = new LocalPrometheus(proc, dir, `http://127.0.0.1:${port}`, output);
    try {
      await waitFor('Prometheus ready', 30_000, async () => proc.exitCode === null && (await fetch(`${p.url}/-/ready`)).ok, 200);
    } catch (err) {
      await p.stop();
      throw new Error(`${String(err)}\nprometheus said:\n${output.join('')}`, { cause: err });
    }
    return p;
  }

  /** The targets to scrape from now on: host:port and the pod each is. */
  setTargets(targets: { address: string; pod: string }[]): void {
    const tmp = join(this.dir, 'targets.json.tmp');
    writeFileSync(tmp, JSON.stringify(targets.map((t) => ({ targets: [t.address], labels: { pod: t.pod } }))));
    renameSync(tmp, join(this.dir, 'targets.json'));
  }

  /** An instant query's samples: labels and value. */
  async query(expr: string): Promise<{ metric: Record<string, string>; value: number }[]> {
    const body = await this.api<{ resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] }>(
      `/api/v1/query?query=${encodeURIComponent(expr)}`,
    );
    return body.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  }

  async alerts(): Promise<ActiveAlert[]> {
    return (await this.api<{ alerts: ActiveAlert[] }>('/api/v1/alerts')).alerts;
  }

  /** What Prometheus logged (warnings and errors), for a failing test's message. */
  log(): string {
    return this.output.join('');
  }

  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async api<T>(path: string): Promise<T> {
    const res = await fetch(`${this.url}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.error ?? res.status}`);
    return body.data;
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const address = s.address();
      s.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
