import { describe, expect, it } from 'vitest';
import { countQuantity, metricSum, parseMetrics, percentile, planLeases, slope, thirds } from '../../hack/bench/scale-stats.js';

describe('planLeases', () => {
  const plan = (namespaces: number, leases: number, fillers = 10) =>
    planLeases({ namespaces, leases, fillersPerNamespace: () => fillers, driverName: (i) => `d${i}.csi.example.com` });

  it('gives every namespace its driver’s four sidecar leases, split between the two driver pods', () => {
    const p = plan(2, 8);
    expect(p.map((l) => `${l.namespace} ${l.name} ${l.holder.kind === 'driver' ? l.holder.replica : l.holder.kind}`)).toEqual([
      '0 d0-csi-example-com 0',
      '0 external-attacher-leader-d0-csi-example-com 1',
      '0 external-resizer-d0-csi-example-com 0',
      '0 external-snapshotter-leader-d0-csi-example-com 1',
      '1 d1-csi-example-com 0',
      '1 external-attacher-leader-d1-csi-example-com 1',
      '1 external-resizer-d1-csi-example-com 0',
      '1 external-snapshotter-leader-d1-csi-example-com 1',
    ]);
  });

  it('spreads the rest round the namespaces: three in four held by filler pods (half client-go style), one by nobody’s pod', () => {
    const p = plan(5, 100);
    expect(p).toHaveLength(100);
    expect(new Set(p.map((l) => `${l.namespace}/${l.name}`)).size).toBe(100);
    const rest = p.filter((l) => l.holder.kind !== 'driver');
    expect(rest).toHaveLength(80);
    expect(rest.filter((l) => l.holder.kind === 'unmanaged')).toHaveLength(20);
    expect(rest.filter((l) => l.holder.kind === 'filler' && l.holder.clientGoSuffix).length).toBeGreaterThan(20);
    for (let ns = 0; ns < 5; ns++) expect(p.filter((l) => l.namespace === ns)).toHaveLength(20);
  });

  it('fewer leases than four per namespace: drivers get what there is; no fillers: nobody’s pod holds the rest', () => {
    expect(plan(4, 9).filter((l) => l.holder.kind === 'driver')).toHaveLength(8);
    expect(plan(2, 12, 0).filter((l) => l.holder.kind === 'filler')).toHaveLength(0);
  });
});

describe('statistics', () => {
  it('nearest-rank percentiles', () => {
    const v = Array.from({ length: 100 }, (_, i) => 100 - i); // 100 … 1
    expect(percentile(v, 50)).toBe(50);
    expect(percentile(v, 99)).toBe(99);
    expect(percentile(v, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeUndefined();
  });

  it('least-squares slope, and mean and minimum of the first and last thirds', () => {
    const line = [0, 1, 2, 3, 4, 5].map((t) => ({ t, v: 10 + 2 * t }));
    expect(slope(line)).toBeCloseTo(2);
    expect(slope([{ t: 1, v: 1 }])).toBeUndefined();
    expect(
      slope([
        { t: 1, v: 1 },
        { t: 1, v: 2 },
      ]),
    ).toBeUndefined();
    expect(slope([0, 1, 2, 3].map((t) => ({ t, v: t % 2 }))) ?? NaN).toBeCloseTo(0.2);
    expect(thirds(line)).toEqual({ first: { mean: 11, min: 10 }, last: { mean: 19, min: 18 } });
    expect(thirds(line.slice(0, 2))).toBeUndefined();
  });
});

it('reads count quantities as the API writes them', () => {
  expect([countQuantity('250'), countQuantity('5k'), countQuantity('1M')]).toEqual([250, 5_000, 1_000_000]);
  expect(countQuantity('1.5k')).toBeNaN();
  expect(countQuantity(undefined)).toBeNaN();
});

describe('parseMetrics', () => {
  const text = [
    '# HELP csi_handover_process_resident_memory_bytes Resident memory size in bytes.',
    '# TYPE csi_handover_process_resident_memory_bytes gauge',
    'csi_handover_process_resident_memory_bytes 104857600',
    'csi_handover_api_requests_total{verb="GET",resource="leases",code="200"} 3',
    'csi_handover_api_requests_total{verb="PUT",resource="leases",code="409"} 1',
    'csi_handover_process_cpu_seconds_total 1.5e1',
  ].join('\n');

  it('reads samples with their labels, and sums a metric', () => {
    const samples = parseMetrics(text);
    expect(samples).toHaveLength(4);
    expect(samples[1]).toEqual({ name: 'csi_handover_api_requests_total', labels: { verb: 'GET', resource: 'leases', code: '200' }, value: 3 });
    expect(metricSum(samples, 'csi_handover_api_requests_total')).toBe(4);
    expect(metricSum(samples, 'csi_handover_process_cpu_seconds_total')).toBe(15);
    expect(metricSum(samples, 'absent_total')).toBeUndefined();
  });
});
