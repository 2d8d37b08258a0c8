import { describe, expect, it } from 'vitest';
import { parseArgs } from '../../src/cli/kubectl-csi-handover.js';
import {
  age,
  type DriverObject,
  driverReport,
  formatStatus,
  formatTimeline,
  parseDriver,
  parseEvents,
  table,
  timelineSvgInput,
} from '../../src/cli/status-view.js';

const T0 = Date.parse('2026-12-02T05:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

const UID = 'b6f1c3a0-0000-4000-8000-000000000001';

function driver(conditions: Record<string, unknown>[] = []): DriverObject {
  return parseDriver({
    metadata: { name: 'hostpath.csi.k8s.io', uid: UID },
    spec: { managementState: 'Managed', logLevel: 'Debug' },
    status: { conditions },
  });
}

/** The driver's CSIHandoverReport as `kubectl get -o json` prints it, owned by the CR of `owner`. */
function reportJson(leases: Record<string, unknown>[], owner = UID): unknown {
  return {
    apiVersion: 'csi-handover.io/v1alpha1',
    kind: 'CSIHandoverReport',
    metadata: {
      name: 'hostpath.csi.k8s.io',
      ownerReferences: [{ apiVersion: 'operator.openshift.io/v1', kind: 'ClusterCSIDriver', name: 'hostpath.csi.k8s.io', uid: owner }],
    },
    status: { lastRollout: { leases }, totals: { handovers: 7, releasedByOperator: 5, releasedByHolder: 1, expired: 1 } },
  };
}

const released = {
  lease: 'external-attacher-leader-hostpath-csi-k8s-io',
  namespace: 'csi-hostpath',
  oldHolder: 'ctrl-a',
  newHolder: 'ctrl-b',
  stopTime: iso(T0),
  releaseTime: iso(T0 + 100),
  acquireTime: iso(T0 + 500),
  releasedBy: 'operator',
  gapSeconds: 0.5,
};
const expired = {
  lease: 'external-resizer-hostpath-csi-k8s-io',
  namespace: 'csi-hostpath',
  oldHolder: 'ctrl-a',
  newHolder: 'ctrl-b',
  stopTime: iso(T0),
  acquireTime: iso(T0 + 15_000),
  releasedBy: 'expiry',
  gapSeconds: 15,
};

describe('kubectl csi-handover arguments', () => {
  it.each([
    [['status', 'd'], { command: 'status', driver: 'd', svg: undefined, kubectlFlags: [] }],
    [['timeline', 'd', '--svg', 'x.svg'], { command: 'timeline', driver: 'd', svg: 'x.svg', kubectlFlags: [] }],
    [['timeline', '--svg=x.svg', 'd', '--context', 'prod'], { command: 'timeline', driver: 'd', svg: 'x.svg', kubectlFlags: ['--context=prod'] }],
    [['--kubeconfig=/k', 'status', 'd'], { command: 'status', driver: 'd', svg: undefined, kubectlFlags: ['--kubeconfig=/k'] }],
  ])('%j', (argv, want) => expect(parseArgs(argv)).toEqual(want));

  it.each([
    [[], ''],
    [['describe', 'd'], 'unknown command describe'],
    [['status'], 'status needs a driver name'],
    [['status', 'd', 'e'], 'unexpected e'],
    [['status', 'd', '--svg', 'x'], '--svg goes with timeline'],
    [['timeline', 'd', '--svg'], '--svg needs a value'],
    [['status', 'd', '-o', 'json'], 'unknown flag -o'],
  ])('%j is refused: %s', (argv, message) => expect(() => parseArgs(argv)).toThrow(message === '' ? /^$/ : message));
});

describe('kubectl csi-handover status', () => {
  it('shows the spec, conditions, the last rollout per lease and the totals', () => {
    const d = driver([
      { type: 'CSIHandoverLeasesHandedOver', status: 'False', reason: 'LeaseExpired', message: 'largest gap 15s', lastTransitionTime: iso(T0 + 15_000) },
    ]);
    const events = parseEvents({
      items: [
        { reason: 'LeaseHandedOver', type: 'Normal', message: 'event-before', count: 1, lastTimestamp: iso(T0 - 60_000), metadata: {} },
        { reason: 'LeaseHandedOver', type: 'Normal', message: 'event-last', count: 3, lastTimestamp: iso(T0 + 15_000), metadata: {} },
        { reason: 42, metadata: {} }, // not an Event we can read: left out
        { reason: 'LeaseHandedOver', type: 'Normal', message: `long ${'x'.repeat(300)}`, lastTimestamp: iso(T0 - 120_000), metadata: {} },
      ],
    });
    const text = formatStatus(d, driverReport(d, reportJson([released, expired])), events, T0 + 75_000);
    expect(text).toContain('managementState: Managed    logLevel: Debug');
    expect(text).toMatch(/CSIHandoverLeasesHandedOver\s+False\s+LeaseExpired\s+60s\s+largest gap 15s/);
    expect(text).toContain('Last rollout: 2 lease(s), completed 60s ago, largest gap 15.0s');
    expect(text).toMatch(/csi-hostpath\/external-attacher-leader-hostpath-csi-k8s-io\s+ctrl-a\s+→\s+ctrl-b\s+0\.5s\s+operator/);
    expect(text).toMatch(/csi-hostpath\/external-resizer-hostpath-csi-k8s-io\s+ctrl-a\s+→\s+ctrl-b\s+15\.0s\s+nobody \(expired\)/);
    expect(text).toContain('7 handover(s); released by the operator 5, by the holder 1, expired 1');
    expect(text.indexOf('event-last')).toBeLessThan(text.indexOf('event-before'));
    expect(text).toContain('(x3)');
    expect(text).toMatch(/long x{134}…\n/);
  });

  it('says so when nothing was reconciled or handed over yet', () => {
    const text = formatStatus(driver(), driverReport(driver(), undefined), [], T0);
    expect(text).toContain('No conditions yet');
    expect(text).toContain('No lease handover recorded yet.');
    expect(text).not.toContain('Recent events');
  });

  it('reads no report from one an earlier CR of the same name left, nor from what is not a report', () => {
    expect(driverReport(driver(), reportJson([released]))?.leases).toHaveLength(1);
    expect(driverReport(driver(), reportJson([released], 'another-uid'))).toBeUndefined();
    expect(driverReport(driver(), { kind: 'Status' })).toBeUndefined();
  });

  it('refuses what is not a ClusterCSIDriver', () => {
    expect(() => parseDriver({ kind: 'Status' })).toThrow('not a ClusterCSIDriver: metadata');
  });
});

describe('kubectl csi-handover timeline', () => {
  it('draws old holder, no leader and new holder per lease, the release marked', () => {
    const text = formatTimeline('d', driverReport(driver(), reportJson([released, expired])), 60);
    const rows = text.split('\n').filter((l) => l.startsWith('csi-hostpath/'));
    expect(rows).toHaveLength(2);
    const chart = (row: string) => row.match(/[▓·█|]{60}/)?.[0] ?? '';
    // The expired lease: old holder, 15 s with no leader, the new holder; no release mark.
    expect(chart(rows[1] ?? '')).toMatch(/^▓+·+█+$/);
    expect(rows[1]).toContain('15.0s, expired');
    // The released lease: a 0.5 s gap on a 15 s axis is under one column, yet shows; the release is marked.
    expect(chart(rows[0] ?? '')).toMatch(/^▓+[·|]+█+$/);
    expect(chart(rows[0] ?? '')).toContain('|');
    expect(rows[0]).toContain('0.5s, released by operator');
  });

  it('says so when no handover is recorded', () => {
    expect(formatTimeline('d', undefined)).toBe('No lease handover recorded for d yet.\n');
  });

  it('gives the SVG picture each lease with its holders, its gap and the old holder stop', () => {
    const input = timelineSvgInput('d', driverReport(driver(), reportJson([released, expired]))!);
    expect(input.leases.map((l) => l.gaps)).toEqual([[{ from: T0, to: T0 + 500 }], [{ from: T0, to: T0 + 15_000 }]]);
    expect(input.leases[0]?.segments.map((s) => s.holder)).toEqual(['ctrl-a', 'ctrl-b']);
    expect(input.stops).toEqual([{ pod: 'ctrl-a', at: T0 }]);
    expect(input.from).toBeLessThan(T0);
    expect(input.to).toBeGreaterThan(T0 + 15_000);
  });
});

describe('formatting helpers', () => {
  it.each([
    [5_000, '5s'],
    [300_000, '5m'],
    [7_200_000, '2h'],
    [259_200_000, '3d'],
  ])('age %d ms', (ms, want) => expect(age(T0 - ms, T0)).toBe(want));
  it('aligns columns', () =>
    expect(
      table([
        ['a', 'bb', 'c'],
        ['ccc', 'd', 'e'],
      ]),
    ).toEqual(['a    bb  c', 'ccc  d   e']));
});
