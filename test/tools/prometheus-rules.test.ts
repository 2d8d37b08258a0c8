// The shipped alert rules, checked by Prometheus' own promtool: they parse, and each alert fires (and only
// then) on the series its promtool unit tests feed it, with its labels and rendered annotations.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { binDir, repoRoot } from '../../hack/lib/cluster.js';
import { makeMetrics } from '../../src/metrics.js';
import { alertRules, expandAnnotations, ruleGroupsOf, seriesNamesIn, seriesOf } from './prometheus.js';

const run = promisify(execFile);
const promtool = join(binDir, 'promtool');
const dir = mkdtempSync(join(tmpdir(), 'csi-handover-rules-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const rulePath = join(repoRoot, 'config', 'prometheus', 'prometheus_rule.yaml');
const groups = ruleGroupsOf(readFileSync(rulePath, 'utf8'));

describe('config/prometheus alert rules', () => {
  it('pass promtool check rules', async () => {
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
    const { stdout } = await run(promtool, ['check', 'rules', join(dir, 'rules.yaml')]);
    expect(stdout).toContain(`SUCCESS: ${alertRules(groups).length} rules found`);
  });

  it('fire on the series of their promtool unit tests, and only on them', async () => {
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
    const cases = parse(readFileSync(join(repoRoot, 'test', 'tools', 'alerts.promtool.yaml'), 'utf8')) as PromtoolTests;
    const byName = new Map(alertRules(groups).map((r) => [r.alert, r]));
    const tested = new Set<string>();
    for (const t of cases.tests) {
      for (const a of t.alert_rule_test) {
        const rule = byName.get(a.alertname);
        if (!rule) throw new Error(`alerts.promtool.yaml tests ${a.alertname}, which config/prometheus does not define`);
        tested.add(a.alertname);
        for (const e of a.exp_alerts) e.exp_annotations = expandAnnotations(rule.annotations ?? {}, e.exp_labels ?? {});
      }
    }
    expect(
      [...byName.keys()].filter((name) => !tested.has(name)),
      'alerts without a promtool test',
    ).toEqual([]);
    writeFileSync(join(dir, 'alerts.test.yaml'), stringify(cases));
    const result = await run(promtool, ['test', 'rules', join(dir, 'alerts.test.yaml')]).catch((err: { stdout?: string; stderr?: string }) => err);
    expect(`${result.stdout ?? ''}${result.stderr ?? ''}`).toContain('SUCCESS');
  });

  it('watch only series the operator exports', async () => {
    const exported = new Set((await makeMetrics().registry.getMetricsAsJSON()).flatMap((m) => seriesOf(m.name, m.type)));
    const used = alertRules(groups).flatMap((r) => seriesNamesIn(r.expr));
    expect(used.length).toBeGreaterThan(0);
    expect(used.filter((name) => !exported.has(name))).toEqual([]);
  });
});

interface PromtoolTests {
  tests: { alert_rule_test: { alertname: string; exp_alerts: { exp_labels?: Record<string, string>; exp_annotations?: Record<string, string> }[] }[] }[];
}
