// Pure parts of `make bench-scale` (scale.ts): where the leases go, percentiles, the memory trend, and reading
// the operator's /metrics text.

/** Who holds a lease the bench creates. */
export type LeaseHolderPlan =
  | { kind: 'driver'; replica: 0 | 1 } // one of the two pods of the namespace's managed driver Deployment
  | { kind: 'filler'; index: number; clientGoSuffix: boolean } // a pod of no managed workload
  | { kind: 'unmanaged'; index: number }; // an identity no pod has

export interface PlannedLease {
  namespace: number;
  name: string;
  holder: LeaseHolderPlan;
}

/** The sidecars' leases of one driver, as csi-lib-utils names them (driver name sanitised). */
const SIDECAR_LEASES = ['', 'external-attacher-leader-', 'external-resizer-', 'external-snapshotter-leader-'];
export const DRIVER_LEASES_PER_NAMESPACE = SIDECAR_LEASES.length;

/**
 * `leases` leases over `namespaces` namespaces: each namespace first gets its driver's sidecar leases (up to
 * four, split between the driver's two pods, as independent sidecar elections end up), and the rest go round
 * the namespaces, three in four held by the namespace's filler pods (every other one client-go style,
 * `<pod>_<suffix>`) and one in four by an identity no pod has.
 */
export function planLeases(p: {
  namespaces: number;
  leases: number;
  fillersPerNamespace: (ns: number) => number;
  driverName: (ns: number) => string;
}): PlannedLease[] {
  const perNs = Math.min(DRIVER_LEASES_PER_NAMESPACE, Math.floor(p.leases / p.namespaces));
  const out: PlannedLease[] = [];
  for (let ns = 0; ns < p.namespaces; ns++) {
    const driver = p.driverName(ns).replace(/[^a-zA-Z0-9-]/g, '-');
    for (let i = 0; i < perNs; i++)
      out.push({ namespace: ns, name: `${SIDECAR_LEASES[i] ?? `lease-${i}-`}${driver}`, holder: { kind: 'driver', replica: (i % 2) as 0 | 1 } });
  }
  const extra = p.leases - out.length;
  const used = new Map<number, number>(); // namespace → extra leases placed
  for (let k = 0; k < extra; k++) {
    const ns = k % p.namespaces;
    const j = used.get(ns) ?? 0;
    used.set(ns, j + 1);
    const fillers = p.fillersPerNamespace(ns);
    const holder: LeaseHolderPlan =
      k % 4 === 3 || fillers === 0 ? { kind: 'unmanaged', index: j } : { kind: 'filler', index: j % fillers, clientGoSuffix: j % 2 === 1 };
    out.push({ namespace: ns, name: `app-lease-${j}`, holder });
  }
  return out;
}

/** A count quantity as the API serialises it (`250`, `5k`, `1M`); NaN when it is something else. */
export function countQuantity(q: string | undefined): number {
  const m = /^(\d+)(k|M)?$/.exec(q ?? '');
  if (!m) return Number.NaN;
  return Number(m[1]) * (m[2] === 'k' ? 1_000 : m[2] === 'M' ? 1_000_000 : 1);
}

/** Nearest-rank percentile of `values` (p in 0–100); undefined when there are none. */
export function percentile(values: readonly number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

export interface Point {
  t: number;
  v: number;
}

/** Least-squares slope of v over t (v per unit of t); undefined with fewer than two distinct times. */
export function slope(points: readonly Point[]): number | undefined {
  const n = points.length;
  if (n < 2) return undefined;
  const mt = points.reduce((s, p) => s + p.t, 0) / n;
  const mv = points.reduce((s, p) => s + p.v, 0) / n;
  const sxx = points.reduce((s, p) => s + (p.t - mt) ** 2, 0);
  if (sxx === 0) return undefined;
  return points.reduce((s, p) => s + (p.t - mt) * (p.v - mv), 0) / sxx;
}

export interface ThirdStats {
  mean: number;
  min: number;
}

/**
 * Mean and minimum of v over the first and the last third of the points (in the order given). For a
 * garbage-collected heap the minimum is the better leak signal: the mean follows the sawtooth between
 * major collections, the minimum approaches what survives one.
 */
export function thirds(points: readonly Point[]): { first: ThirdStats; last: ThirdStats } | undefined {
  const k = Math.floor(points.length / 3);
  if (k === 0) return undefined;
  const stats = (ps: readonly Point[]): ThirdStats => ({ mean: ps.reduce((s, p) => s + p.v, 0) / ps.length, min: Math.min(...ps.map((p) => p.v)) });
  return { first: stats(points.slice(0, k)), last: stats(points.slice(-k)) };
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments skipped; label values without escaped quotes). */
export function parseMetrics(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m?.[1] || m[3] === undefined) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1] ?? '', l[2] ?? '']));
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of every sample of the metric; undefined when the exposition has none. */
export function metricSum(samples: readonly Sample[], name: string): number | undefined {
  const mine = samples.filter((s) => s.name === name);
  return mine.length ? mine.reduce((sum, s) => sum + s.value, 0) : undefined;
}
