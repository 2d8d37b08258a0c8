import { describe, expect, it } from 'vitest';
import type { HandoverRecord } from '../../src/handover/measure.js';
import { handoverCondition } from '../../src/status/conditions.js';
import {
  EVENT_MESSAGE_MAX,
  type HandoverReport,
  handoverMessage,
  HandoverReports,
  handoversMessage,
  handoverStatus,
  reportFromStatus,
  withHandover,
} from '../../src/handover/report.js';

const T = Date.parse('2026-01-02T03:04:05.123Z');
const record = (over: Partial<HandoverRecord> = {}): HandoverRecord => ({
  namespace: 'csi',
  lease: 'attacher',
  oldHolder: 'ctrl-a',
  newHolder: 'ctrl-b',
  stopAt: T,
  releasedAt: T + 300,
  releasedBy: 'operator',
  acquiredAt: T + 512,
  gapMs: 512,
  ...over,
});

describe('handover report', () => {
  it('keeps the last handover per lease (by namespace and name) and counts every one', () => {
    let r = withHandover(undefined, record());
    r = withHandover(r, record({ newHolder: 'ctrl-c', releasedBy: 'holder' }));
    r = withHandover(r, record({ namespace: 'other', releasedBy: 'expiry', gapMs: 140_000 }));
    expect(r.leases.map((h) => `${h.namespace}/${h.lease} ${h.newHolder}`)).toEqual(['csi/attacher ctrl-c', 'other/attacher ctrl-b']);
    expect(r.totals).toEqual({ handovers: 3, releasedByOperator: 1, releasedByHolder: 1, expired: 1 });
  });

  it('survives the round trip through the CSIHandoverReport status unchanged (so a restart writes nothing new)', () => {
    const r = withHandover(
      withHandover(undefined, record()),
      record({ lease: 'provisioner', gapMs: undefined, stopAt: undefined, releasedAt: undefined, releasedBy: 'expiry' }),
    );
    const status = handoverStatus(r);
    const back = reportFromStatus(JSON.parse(JSON.stringify(status)));
    expect(back && handoverStatus(back)).toEqual(status);
    expect(back?.totals).toEqual(r.totals);
  });

  it.each([
    ['no status', undefined],
    ['no handover in it', { conditions: [] }],
    ['a handover we cannot read', { lastRollout: { leases: [{ lease: 'x' }] } }],
    [
      'a time that is not one',
      {
        lastRollout: { leases: [{ ...handoverStatusLease(), acquireTime: 'soon' }] },
        totals: { handovers: 1, releasedByOperator: 1, releasedByHolder: 0, expired: 0 },
      },
    ],
  ])('reads nothing from %s (and starts afresh)', (_n, status) => expect(reportFromStatus(status)).toBeUndefined());

  it('the condition summarises the largest gap and who released; keeps the CR’s own when it knows no handover', () => {
    const r = withHandover(undefined, record());
    expect(handoverCondition(r, [])).toEqual({
      type: 'CSIHandoverLeasesHandedOver',
      status: 'True',
      reason: 'ReleasedByOperator',
      message: 'last handover of 1 lease(s): largest gap 0.5s (csi/attacher); released by operator 1, by holder 0, expired 0',
    });
    expect(handoverCondition(withHandover(r, record({ lease: 'p', releasedBy: 'expiry' })), [])).toMatchObject({ status: 'False', reason: 'LeaseExpired' });
    expect(handoverCondition(undefined, [])).toMatchObject({ status: 'Unknown', reason: 'NoHandoverYet' });
    // No stored report (its CRD not installed, or deleted): after a restart the condition is all there is, and it stays.
    const kept = {
      type: 'CSIHandoverLeasesHandedOver',
      status: 'True' as const,
      reason: 'ReleasedByOperator',
      message: 'from before',
      lastTransitionTime: 'x',
    };
    expect(handoverCondition(undefined, [kept])).toEqual({ type: kept.type, status: 'True', reason: 'ReleasedByOperator', message: 'from before' });
  });

  it('HandoverReports: the leader seeds a driver from its CR once, then adds to it', () => {
    let seeded = 0;
    const reports = new HandoverReports((driver) => {
      seeded++;
      return driver === 'd' ? withHandover(undefined, record()) : undefined;
    });
    reports.startLeading();
    expect(reports.add('d', record({ lease: 'provisioner' }))).toBe(true);
    expect(reports.get('d')?.totals.handovers).toBe(2);
    expect(reports.get('d')?.leases).toHaveLength(2);
    expect(reports.get('e')).toBeUndefined();
    expect(seeded).toBe(2);
  });

  it('HandoverReports: a report belongs to its CR by UID — a CR made again under the same name starts clean', () => {
    const stored = { uid: 'uid-1', report: withHandover(undefined, record()) };
    let crUid: string | undefined = 'uid-1';
    const reports = new HandoverReports(
      (driver, uid) => (driver === 'd' && uid === stored.uid ? stored.report : undefined),
      () => crUid,
    );
    reports.startLeading();
    reports.add('d', record({ lease: 'provisioner' }));
    expect(reports.get('d')?.totals.handovers).toBe(2);
    crUid = 'uid-2'; // deleted and created again: neither the memory nor the stored report of uid-1 is its
    expect(reports.get('d')).toBeUndefined();
    reports.add('d', record({ lease: 'resizer' }));
    expect(reports.get('d')?.leases.map((h) => h.lease)).toEqual(['resizer']);
    expect(reports.get('d')?.totals.handovers).toBe(1);
    crUid = undefined; // no CR at all: what was kept for uid-2 is not served either
    expect(reports.get('d')).toBeUndefined();
  });

  it('HandoverReports: a standby’s observations add only what the CR lacks when it starts leading', () => {
    const fromCr = withHandover(undefined, record({ releasedBy: 'operator' }));
    const reports = new HandoverReports((driver) => (driver === 'd' ? fromCr : undefined));
    // The same handover, timed a few ms apart by this replica; one the old leader never wrote; another driver's.
    expect(reports.add('d', record({ acquiredAt: T + 515, gapMs: 515 }))).toBe(false);
    reports.add('d', record({ lease: 'provisioner', newHolder: 'ctrl-c' }));
    reports.add('e', record({ namespace: 'e' }));
    expect(reports.startLeading().sort()).toEqual(['d', 'e']);
    const d = reports.get('d');
    expect(d?.leases.find((h) => h.lease === 'attacher')).toEqual(fromCr.leases[0]);
    expect(d?.leases.find((h) => h.lease === 'provisioner')?.newHolder).toBe('ctrl-c');
    expect(d?.totals.handovers).toBe(2);
    expect(reports.get('e')?.totals.handovers).toBe(1);
  });

  it('HandoverReports: a leader that loses and leads again keeps the handovers its CR did not get, once', () => {
    let cr: HandoverReport | undefined = withHandover(undefined, record({ releasedBy: 'operator' }));
    const reports = new HandoverReports((driver) => (driver === 'd' ? cr : undefined));
    reports.startLeading();
    reports.add('d', record({ lease: 'provisioner', newHolder: 'ctrl-c' })); // never written: the lease was lost first
    reports.stopLeading();
    expect(reports.add('d', record({ lease: 'resizer' }))).toBe(false); // a standby again: kept aside
    cr = withHandover(cr, record({ lease: 'snapshotter' })); // what the other leader wrote meanwhile
    expect(reports.startLeading()).toEqual(['d']);
    const d = reports.get('d');
    expect(d?.leases.map((h) => h.lease).sort()).toEqual(['attacher', 'provisioner', 'resizer', 'snapshotter']);
    expect(d?.totals.handovers).toBe(4);
  });
});

function handoverStatusLease(): Record<string, unknown> {
  return { lease: 'l', namespace: 'n', oldHolder: 'a', newHolder: 'b', releasedBy: 'operator', acquireTime: '2026-01-02T03:04:05Z' };
}

describe('handoversMessage', () => {
  it('says one handover as its own message', () => {
    expect(handoversMessage([record()])).toBe(handoverMessage(record()));
  });
  it('says the handovers seen together in one message, each with old → new holder', () => {
    const m = handoversMessage([record(), record({ lease: 'provisioner', newHolder: 'ctrl-c' })]);
    expect(m).toMatch(/^2 leases handed over: /);
    expect(m).toContain(`${record().namespace}/${record().lease}: ${record().oldHolder} → ${record().newHolder}, leaderless`);
    expect(m).toContain(`/provisioner: ${record().oldHolder} → ctrl-c`);
  });
  it('stays within the Event size, saying how many it left out', () => {
    const many = Array.from({ length: 40 }, (_, i) => record({ lease: `external-snapshotter-leader-lease-number-${i}` }));
    const m = handoversMessage(many);
    expect(m.length).toBeLessThanOrEqual(EVENT_MESSAGE_MAX);
    const kept = (m.match(/→/g) ?? []).length;
    expect(kept).toBeGreaterThan(0);
    expect(m).toContain(`… and ${40 - kept} more (the CSIHandoverReport lists them)`);
  });
});
