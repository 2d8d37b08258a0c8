// The model behind early starts: the slowest recent death against the fastest recent start, per workload (and
// per node for deaths), nothing before enough of both, and back to waiting after a start that lost.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  containersStartedBy,
  earlyLiftAt,
  lessonOf,
  LOST_AFTER_MS,
  LOST_BACKOFF_MS,
  MARGIN_MS,
  MIN_SAMPLES,
  OverlapModel,
  witnessLiftAt,
} from '../../src/handover/overlap.js';

describe('OverlapModel', () => {
  const W = 'ns/ctrl';
  const learned = (deaths: number[], starts: number[], node = 'n1'): OverlapModel => {
    const m = new OverlapModel();
    deaths.forEach((ms, i) => m.death(W, node, `old-${i}`, ms));
    starts.forEach((ms, i) => m.start(W, `new-${i}`, ms));
    return m;
  };

  it('predicts nothing before it has seen enough pods die and start', () => {
    expect(learned([900, 1000], [1500, 1600, 1700]).predict(W, 'n1')).toBeUndefined();
    expect(learned([900, 1000, 1100], [1500, 1600]).predict(W, 'n1')).toBeUndefined();
    expect(learned([900, 1000, 1100], [1500, 1600, 1700]).predict(W, 'n1')).toEqual({ deathMs: 1100, startMs: 1500 });
    expect(MIN_SAMPLES).toBe(3);
  });

  it('counts pods, not leases: five leases of one pod are one death (its slowest) and one start (its earliest sidecar)', () => {
    const m = new OverlapModel();
    for (const ms of [800, 950, 1200, 900, 1000]) m.death(W, 'n1', 'old-0', ms);
    for (const ms of [2100, 1300, 3400]) m.start(W, 'new-0', ms);
    m.death(W, 'n1', 'old-1', 700);
    m.death(W, 'n1', 'old-2', 750);
    m.start(W, 'new-1', 1900);
    m.start(W, 'new-2', 2000);
    expect(m.predict(W, 'n1')).toEqual({ deathMs: 1200, startMs: 1300 });
  });

  it('deaths per node where it knows enough of that node, else the workload’s', () => {
    const m = learned([500, 600, 700], [2000, 2100, 2200], 'fast');
    m.death(W, 'slow', 'slow-0', 3000);
    expect(m.predict(W, 'fast')?.deathMs).toBe(700);
    expect(m.predict(W, 'slow')?.deathMs).toBe(3000); // one sample of its own: the workload's, which includes it
    expect(m.predict(W, undefined)?.deathMs).toBe(3000);
  });

  it('follows the nodes as they are now: only the last ten pods count', () => {
    const m = learned([5000, ...Array(10).fill(600)], [2000, 2100, 2200]);
    expect(m.predict(W, 'n1')?.deathMs).toBe(600);
  });

  it('a start that lost the race forgets the starts: wait for releases until relearned', () => {
    const m = learned([600, 700, 800], [2000, 2100, 2200]);
    m.lost(W);
    expect(m.predict(W, 'n1')).toBeUndefined();
    expect(learned([600, 700, 800], [2000, 2100, 2200]).predict('other/ctrl', 'n1')).toBeUndefined();
  });

  it('lets go when the slowest death plus the margin is reported before the fastest start could try', () => {
    expect(earlyLiftAt({ deathMs: 1000, startMs: 1500 }, 10_000)).toBe(10_000 + 1000 + MARGIN_MS - 1500);
    // Slower deaths than starts: later than the deletion, by the difference and the margin.
    expect(earlyLiftAt({ deathMs: 2000, startMs: 1000 }, 10_000)).toBe(10_000 + 1000 + MARGIN_MS);
  });
});

describe('lessonOf (what one handover teaches)', () => {
  const h = { releasedBy: 'operator', stopAt: 10_000, releasedAt: 11_000, acquiredAt: 12_500 };
  it.each<[string, Parameters<typeof lessonOf>[0] & { startedBy?: number }, Parameters<typeof lessonOf>[1], ReturnType<typeof lessonOf>]>([
    ['a pod let go after our release: the death and its start', h, { at: 11_050, early: false }, { death: 1000, start: 1450 }],
    ['the lift seen a hair before the release event: still after it', h, { at: 10_950, early: false }, { death: 1000, start: 1550 }],
    ['a pod let go well before the release without the model (a timeout, a surge): no start', h, { at: 9_000, early: false }, { death: 1000 }],
    ['an early pod that acquired at its first attempt: did not lose', h, { at: 10_100, early: true }, { death: 1000, lost: false }],
    [
      'an early pod that acquired after a retry period: lost',
      { ...h, acquiredAt: 11_000 + LOST_AFTER_MS + 1 },
      { at: 10_100, early: true },
      { death: 1000, lost: true },
    ],
    [
      'an early pod that acquired within a retry of the release, long after it was let go: did not lose',
      { ...h, acquiredAt: 11_000 + LOST_AFTER_MS },
      { at: 10_100, early: true },
      { death: 1000, lost: false },
    ],
    [
      'an early pod let go for one leader that takes another leader’s lease half a minute later, on its release: did not lose',
      { releasedBy: 'operator', stopAt: 40_000, releasedAt: 40_800, acquiredAt: 41_500 },
      { at: 10_100, early: true },
      { death: 800, lost: false },
    ],
    ['a pod never gated (a candidate that was up already): only the death', h, undefined, { death: 1000 }],
    [
      'an early pod whose last container started after the release, and that acquired soon after it started: did not lose',
      { ...h, acquiredAt: 11_000 + LOST_AFTER_MS + 3_000, startedBy: 11_000 + LOST_AFTER_MS + 1_000 },
      { at: 10_100, early: true },
      { death: 1000, lost: false },
    ],
    [
      'an early pod up before the release that acquired a retry period after it: lost',
      { ...h, acquiredAt: 11_000 + LOST_AFTER_MS + 1, startedBy: 10_900 },
      { at: 10_100, early: true },
      { death: 1000, lost: true },
    ],
    ['released by the holder itself or by expiry: nothing', { ...h, releasedBy: 'holder' }, { at: 11_050, early: false }, {}],
    ['no stop seen: no death', { ...h, stopAt: undefined }, { at: 11_050, early: false }, { death: undefined, start: 1450 }],
  ])('%s', (_n, { startedBy, ...record }, letGo, want) => {
    expect(lessonOf(record, letGo, startedBy)).toEqual(want);
  });
});

describe('containersStartedBy', () => {
  const at = (iso: string) => Date.parse(iso);
  const pod = (states: object[], init: object[] = []): V1Pod => ({
    spec: {
      containers: states.map((_, i) => ({ name: `c${i}` })),
      initContainers: init.map((_, i) => ({ name: `i${i}`, restartPolicy: 'Always' })),
    },
    status: {
      containerStatuses: states.map((state, i) => ({ name: `c${i}`, image: '', imageID: '', ready: true, restartCount: 0, state })),
      initContainerStatuses: init.map((state, i) => ({ name: `i${i}`, image: '', imageID: '', ready: true, restartCount: 0, state })),
    },
  });
  it.each<[string, V1Pod, number | undefined]>([
    [
      'the last start, plus the second it is rounded down to',
      pod([{ running: { startedAt: '2026-01-02T03:04:05Z' } }, { running: { startedAt: '2026-01-02T03:04:09Z' } }]),
      at('2026-01-02T03:04:10Z'),
    ],
    [
      'a container that ran and ended counts by its start',
      pod([{ terminated: { exitCode: 0, startedAt: '2026-01-02T03:04:05Z' } }]),
      at('2026-01-02T03:04:06Z'),
    ],
    ['one still waiting: not all started', pod([{ running: { startedAt: '2026-01-02T03:04:05Z' } }, { waiting: { reason: 'ContainerCreating' } }]), undefined],
    ['a sidecar init container counts too', pod([{ running: { startedAt: '2026-01-02T03:04:05Z' } }], [{ waiting: {} }]), undefined],
    ['no status yet', { spec: { containers: [{ name: 'c0' }] } }, undefined],
  ])('%s', (_n, p, want) => {
    expect(containersStartedBy(p)).toBe(want);
  });
});

describe('witnessLiftAt', () => {
  const now = 1_000_000;
  const witnessed = new Set(['node-1']);
  it.each<[string, string | undefined, number | undefined, number | undefined]>([
    ['a witness on the old leader’s node: at once', 'node-1', undefined, now],
    ['no witness on its node: wait for the release', 'node-2', undefined, undefined],
    ['an unbound old leader', undefined, undefined, undefined],
    ['a pod started that way lost the race lately: wait', 'node-1', now - LOST_BACKOFF_MS + 1, undefined],
    ['the loss is long past: at once again', 'node-1', now - LOST_BACKOFF_MS, now],
  ])('%s', (_case, node, lostAt, want) => {
    expect(witnessLiftAt(node, witnessed, lostAt, now)).toBe(want);
  });
});
