// Reading the shipped PrometheusRule and Grafana dashboard for the tools tests.
import { parse } from 'yaml';

export interface AlertRule {
  alert: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface RuleGroup {
  name: string;
  rules: AlertRule[];
}

/** The rule groups of a PrometheusRule manifest (promtool reads the groups alone). */
export function ruleGroupsOf(manifest: string): RuleGroup[] {
  const doc = parse(manifest) as { kind?: string; spec?: { groups?: RuleGroup[] } };
  if (doc.kind !== 'PrometheusRule' || !doc.spec?.groups?.length) throw new Error('not a PrometheusRule with rule groups');
  return doc.spec.groups;
}

export const alertRules = (groups: RuleGroup[]): AlertRule[] => groups.flatMap((g) => g.rules.filter((r) => r.alert));

/** An alert's annotations as Prometheus renders them for these labels: only `{{ $labels.x }}` is used. */
export function expandAnnotations(annotations: Record<string, string>, labels: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(annotations).map(([k, v]) => [
      k,
      v.replace(/\{\{ *\$labels\.([a-zA-Z_]+) *\}\}/g, (_, l: string) => {
        const value = labels[l];
        if (value === undefined) throw new Error(`annotation ${k} uses label ${l}, which the expected alert does not carry`);
        return value;
      }),
    ]),
  );
}

// PromQL words that look like metric names: functions, aggregations, keywords.
const PROMQL_WORDS = new Set([
  'sum',
  'by',
  'without',
  'increase',
  'rate',
  'irate',
  'histogram_quantile',
  'or',
  'and',
  'unless',
  'vector',
  'max',
  'min',
  'avg',
  'count',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'offset',
  'clamp_min',
  'label_replace',
  'topk',
  'bool',
  'le',
]);

/** The metric names an expression reads (identifiers starting csi_handover_; anything else is a PromQL word or a label). */
export function seriesNamesIn(expr: string): string[] {
  const withoutMatchers = expr.replace(/\{[^}]*\}/g, '').replace(/"[^"]*"/g, '');
  return [
    ...new Set(
      [...withoutMatchers.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((w) => !PROMQL_WORDS.has(w) && w.startsWith('csi_handover_')),
    ),
  ];
}

/** A metric's series names as Prometheus stores them (a histogram's _bucket, _sum and _count). */
export function seriesOf(name: string, type: unknown): string[] {
  return String(type) === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name];
}
