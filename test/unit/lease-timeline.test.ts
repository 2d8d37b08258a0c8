import { describe, expect, it } from 'vitest';
import type { Handover } from '../../hack/bench/handovers.js';
import {
  figuresByRuntime,
  firstAttemptIn,
  formatRuntimeFigures,
  formatTimelines,
  type LeaseTimeline,
  leaseTimelines,
  type PodSightings,
} from '../../hack/bench/lease-timeline.js';
import type { NodeEvent } from '../../hack/lib/node-events.js';

const T = Date.parse('2026-12-03T12:00:00Z');
const iso = (ms: number) => new Date(T + ms).toISOString();
const ev = (pod: string, event: NodeEvent['event'], ms: number, container?: string): NodeEvent => ({
  t: iso(ms),
  node: 'node-1',
  namespace: 'csi',
  pod,
  uid: pod,
  event,
  ...(container ? { container } : {}),
});

describe('leaseTimelines', () => {
  it('places every step after the old leader’s SIGTERM, each from its own source', () => {
    const h: Handover = { lease: 'attacher-lease', oldHolder: 'old', newHolder: 'new', stopAt: T, releasedAt: T + 450, acquiredAt: T + 1900, gapMs: 1900 };
    const pods = new Map<string, PodSightings>([
      ['old', { name: 'old', witnessAt: T + 380, exitedBy: T + 330, reportedAt: T + 1100 }],
      ['new', { name: 'new', addedAt: T + 40, boundAt: T + 60 }],
    ]);
    const events = [
      ev('old', 'signal', 0),
      ev('old', 'container-exited', 200, 'csi-attacher'),
      ev('old', 'container-exited', 310, 'hostpath'),
      ev('old', 'container-exited', -60_000, 'from-an-earlier-restart'),
      ev('new', 'pod-started', 700),
      ev('new', 'container-started', 1200, 'csi-attacher'),
      ev('new', 'container-started', 1000, 'hostpath'),
    ];
    const attempts = new Map([['new', new Map([['csi-attacher', T + 1500]])]]);
    const [row] = leaseTimelines([h], () => 'csi-attacher', pods, events, attempts);
    expect(row).toEqual({
      lease: 'attacher-lease',
      sidecar: 'csi-attacher',
      oldPod: 'old',
      oldNode: 'node-1',
      newPod: 'new',
      sigterm: 0,
      lastExit: 310,
      proven: 330,
      evidence: 380,
      kubeletReport: 1100,
      released: 450,
      newPodCreated: 40,
      newPodBound: 60,
      sandboxStarted: 700,
      sidecarStarted: 1200,
      firstAttempt: 1500,
      acquired: 1900,
    });
    expect(formatTimelines(row ? [row] : [])).toMatch(/csi-attacher\s+0\.31\s+0\.33\s+0\.38\s+1\.10\s+0\.45\s+0\.04\s+0\.06\s+0\.70\s+1\.20\s+1\.50\s+1\.90/);
  });

  it('leaves out what it did not see, and a handover with no SIGTERM has no times', () => {
    const h: Handover = { lease: 'l', oldHolder: 'old', newHolder: 'new', acquiredAt: T };
    const [row] = leaseTimelines([h], (l) => l, new Map(), [], new Map());
    expect(row?.released).toBeUndefined();
    expect(row?.acquired).toBeNaN();
  });
});

describe('figuresByRuntime', () => {
  const row = (oldNode: string | undefined, proven: number | undefined, acquired: number): LeaseTimeline => ({
    lease: `l-${String(proven)}-${acquired}`,
    sidecar: 's',
    oldPod: 'old',
    ...(oldNode ? { oldNode } : {}),
    newPod: 'new',
    ...(proven !== undefined ? { proven } : {}),
    released: acquired - 100,
    acquired,
  });
  const runtimes = new Map([
    ['node-1', 'containerd'],
    ['node-2', 'cri-o'],
  ]);

  it('groups the handovers by the runtime of the old leader’s node, each with its own p50s', () => {
    const rows = [row('node-1', 300, 1500), row('node-1', 340, 1700), row('node-1', 320, 1600), row('node-2', 360, 1800), row('node-2', undefined, 2000)];
    expect(figuresByRuntime(rows, runtimes)).toEqual([
      { runtime: 'containerd', count: 3, proven: 320, released: 1500, gap: 1600 },
      // A handover without proof (the witness saw nothing) counts, but has no proven time.
      { runtime: 'cri-o', count: 2, proven: 360, released: 1700, gap: 1800 },
    ]);
  });

  it('leaves out a handover whose node is unknown or not a real node', () => {
    expect(figuresByRuntime([row(undefined, 300, 1500), row('kwok-1', 300, 1500)], runtimes)).toEqual([]);
  });

  it('prints one line per runtime', () => {
    expect(formatRuntimeFigures([{ runtime: 'cri-o', count: 2, proven: 360, released: 1700, gap: 1800 }])).toEqual([
      'cri-o        2 handover(s): SIGTERM → proven p50 0.36s, → release 1.70s, gap 1.80s',
    ]);
  });
});

describe('firstAttemptIn', () => {
  it('reads the time of the first attempt from a CRI log file', () => {
    const log = [
      '2026-12-03T12:03:56.600000000Z stderr F I1203 12:03:56.600000 1 main.go:1] starting',
      '2026-12-03T12:03:56.675857708Z stderr F I1203 12:03:56.675714 1 leaderelection.go:258] "Attempting to acquire leader lease..." lock="csi/x"',
      '2026-12-03T12:03:59.000000000Z stderr F I1203 12:03:59.000000 1 leaderelection.go:258] "Attempting to acquire leader lease..." lock="csi/x"',
    ].join('\n');
    expect(firstAttemptIn(log)).toBe(Date.parse('2026-12-03T12:03:56.675Z'));
    expect(firstAttemptIn('nothing here\n')).toBeUndefined();
  });
});
