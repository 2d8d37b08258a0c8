// The shipped Grafana dashboard: every panel's query parses (promtool, as recording rules) and reads only
// series the operator exports, and the panels do not overlap on the grid.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { binDir, repoRoot } from '../../hack/lib/cluster.js';
import { makeMetrics } from '../../src/metrics.js';
import { seriesNamesIn, seriesOf } from './prometheus.js';

interface Panel {
  id: number;
  title: string;
  datasource?: { uid?: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets: { expr: string; refId: string }[];
}

const dashboard = JSON.parse(readFileSync(join(repoRoot, 'config', 'grafana', 'dashboard.json'), 'utf8')) as { uid: string; panels: Panel[] };
const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ panel: p.title, expr: t.expr })));
const dir = mkdtempSync(join(tmpdir(), 'csi-handover-dashboard-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('config/grafana dashboard', () => {
  it('has queries that promtool parses', async () => {
    expect(exprs.length).toBeGreaterThan(0);
    // Grafana's interval variables become fixed durations for the parser.
    const rules = exprs.map((e, i) => ({ record: `dashboard:query_${i}`, expr: e.expr.replaceAll('$__rate_interval', '5m').replaceAll('$__range', '1h') }));
    writeFileSync(join(dir, 'queries.yaml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
    const { stdout } = await promisify(execFile)(join(binDir, 'promtool'), ['check', 'rules', join(dir, 'queries.yaml')]);
    expect(stdout).toContain(`SUCCESS: ${rules.length} rules found`);
  });

  it('reads only series the operator exports', async () => {
    const exported = new Set((await makeMetrics().registry.getMetricsAsJSON()).flatMap((m) => seriesOf(m.name, m.type)));
    const unknown = exprs.flatMap((e) =>
      seriesNamesIn(e.expr)
        .filter((s) => !exported.has(s))
        .map((s) => `${e.panel}: ${s}`),
    );
    expect(unknown).toEqual([]);
    expect(exprs.every((e) => seriesNamesIn(e.expr).length > 0)).toBe(true);
  });

  it('lays its panels out without overlap, each on the chosen data source, ids unique', () => {
    const overlaps = (a: Panel['gridPos'], b: Panel['gridPos']) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
    const ps = dashboard.panels;
    const clashes = ps.flatMap((a, i) =>
      ps
        .slice(i + 1)
        .filter((b) => overlaps(a.gridPos, b.gridPos))
        .map((b) => `${a.title} / ${b.title}`),
    );
    expect(clashes).toEqual([]);
    expect(ps.every((p) => p.gridPos.x + p.gridPos.w <= 24)).toBe(true);
    expect(ps.filter((p) => p.datasource?.uid !== '${datasource}').map((p) => p.title)).toEqual([]);
    expect(new Set(ps.map((p) => p.id)).size).toBe(ps.length);
  });
});
