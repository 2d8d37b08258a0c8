// `kubectl csi-handover`, as a user runs it: the real kubectl finds the plugin on PATH (bin/, running the built
// dist/) and the plugin reads, through kubectl, what the operator recorded about a real rollout.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binDir, clusterHttp, kubeconfigPath, repoRoot, SAMPLE_DRIVER } from '../../hack/lib/cluster.js';
import { handOverByLevel, LEVELS, standaloneSampleAt } from '../../hack/lib/operator.js';
import type { HandoverReport } from '../../src/handover/report.js';

const run = promisify(execFile);
const http = clusterHttp();
const dir = mkdtempSync(join(tmpdir(), 'csi-handover-plugin-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `kubectl csi-handover ...` through the real kubectl, the plugin found on PATH. */
async function plugin(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = {
    ...process.env,
    KUBECONFIG: kubeconfigPath,
    PATH: `${join(repoRoot, 'bin')}:${binDir}:${process.env.PATH ?? ''}`,
    KUBECTL: join(binDir, 'kubectl'),
  };
  return run(join(binDir, 'kubectl'), ['csi-handover', ...args], { env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

let recorded: HandoverReport;

beforeAll(async () => {
  // The plugin runs the built JavaScript, as a user's checkout would after `make build`.
  await run(join(repoRoot, 'node_modules', '.bin', 'tsc'), ['-p', join(repoRoot, 'tsconfig.build.json')], { cwd: repoRoot });
  await standaloneSampleAt(http, LEVELS[4] ?? 'Debug');
  // A level change, so that the CR reports a rollout whose old holder we know.
  recorded = (await handOverByLevel(http, LEVELS[2] ?? 'Normal')).report;
});

describe('kubectl csi-handover', () => {
  it('status shows the conditions and, per lease, old → new holder, gap and who released, as the CR records them', async () => {
    const { code, stdout, stderr } = await plugin('status', SAMPLE_DRIVER);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toContain(`ClusterCSIDriver ${SAMPLE_DRIVER}`);
    expect(stdout).toContain('logLevel: Normal');
    expect(stdout).toMatch(/CSIHandoverLeasesHandedOver\s+True/);
    for (const h of recorded.leases) {
      const row = stdout.split('\n').find((l) => l.includes(`${h.namespace}/${h.lease} `));
      expect(row, `a row for ${h.lease}`).toBeDefined();
      expect(row).toMatch(new RegExp(`${h.oldHolder}\\s+→\\s+${h.newHolder}\\s+\\S+s\\s+${h.releasedBy}`));
    }
    expect(stdout).toMatch(/Recent events:\n.*LeaseHandedOver/);
  });

  it('timeline draws the last rollout in the terminal and, with --svg, as a picture', async () => {
    const svg = join(dir, 'rollout.svg');
    const { code, stdout, stderr } = await plugin('timeline', SAMPLE_DRIVER, '--svg', svg);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    for (const h of recorded.leases) expect(stdout).toMatch(new RegExp(`${h.namespace}/${h.lease.slice(0, 20)}.*[▓·|█]{60}`));
    expect(stdout).toContain(`wrote ${svg}`);
    expect(existsSync(svg)).toBe(true);
    const picture = readFileSync(svg, 'utf8');
    expect(picture.startsWith('<svg')).toBe(true);
    for (const h of recorded.leases) expect(picture).toContain(h.lease);
  });

  it('a driver that has no ClusterCSIDriver: a clear error and a failing exit code', async () => {
    const { code, stdout, stderr } = await plugin('status', 'no-such.csi.example.com');
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr).toContain('"no-such.csi.example.com" not found');
  });

  it('a wrong invocation prints the usage', async () => {
    const { code, stderr } = await plugin('describe', SAMPLE_DRIVER);
    expect(code).toBe(2);
    expect(stderr).toContain('unknown command describe');
    expect(stderr).toContain('kubectl csi-handover status <driver>');
  });
});
