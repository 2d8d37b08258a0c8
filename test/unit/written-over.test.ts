import { describe, expect, it } from 'vitest';
import { WrittenOver } from '../../src/kube/written-over.js';

describe('WrittenOver', () => {
  it('knows a write decided on the version it replaced, for a while', () => {
    let now = 0;
    const w = new WrittenOver(5000, () => now);
    w.note('pod/u', '7', 'cost 100', '8', '7');
    expect(w.has('pod/u', '7', 'cost 100')).toBe(true);
    expect(w.has('pod/u', '7', 'lift')).toBe(false); // another write: do it
    expect(w.has('pod/v', '7', 'cost 100')).toBe(false);
    now = 4999;
    expect(w.has('pod/u', '7', 'cost 100')).toBe(true);
    now = 5000; // the watch should have brought the successor by now: trust the cache again
    expect(w.has('pod/u', '7', 'cost 100')).toBe(false);
    w.note('pod/u', undefined, 'x', undefined, undefined); // no version, nothing to compare with: never skipped
    expect(w.has('pod/u', undefined, 'x')).toBe(false);
  });

  it('treats every version before the one the write produced as stale: an earlier write echoing in between', () => {
    const w = new WrittenOver(5000, () => 0);
    // hold written over 1 → 2; then, on 1 still (2 not in yet), the lift over 2 → 3
    w.note('pod/u', '1', 'hold', '2', '1');
    w.note('pod/u', '1', 'lift', '3', '1');
    w.seen('pod/u', '2'); // the hold's echo: the gate is still on in it, but the lift already took it off
    expect(w.has('pod/u', '2', 'lift')).toBe(true);
    expect(w.has('pod/u', '2', 'hold')).toBe(false); // seen: decide on it again
    w.seen('pod/u', '3'); // the lift's echo: the cache is up to date
    expect(w.has('pod/u', '3', 'lift')).toBe(false);
    expect(w.size).toBe(0);
  });

  it('a refused write (409) is stale only on the version it was refused on', () => {
    const w = new WrittenOver(5000, () => 0);
    w.note('lease/a', '7', 'release', undefined, '7');
    expect(w.has('lease/a', '7', 'release')).toBe(true);
    w.seen('lease/a', '7'); // the same version again (a resync): still stale
    expect(w.has('lease/a', '7', 'release')).toBe(true);
    w.seen('lease/a', '9'); // its successor: decide on it
    expect(w.has('lease/a', '9', 'release')).toBe(false);
    expect(w.size).toBe(0);
  });

  it('forgets what a gone object had, and writes never seen once their trust is over', () => {
    let now = 0;
    const w = new WrittenOver(5000, () => now);
    w.note('pod/u', '1', 'x', '2', '1');
    w.gone('pod/u');
    expect(w.has('pod/u', '1', 'x')).toBe(false);
    w.note('pod/v', '1', 'x', '2', '1');
    now = 6000;
    w.seen('pod/v', '5'); // a relist skipped the echo
    expect(w.size).toBe(0);
  });

  it('notes nothing when the watch brought a successor before the write returned (its echo, or a later version)', () => {
    const w = new WrittenOver(5000, () => 0);
    w.note('lease/a', '7', 'release', '8', '8'); // the echo came first
    expect(w.has('lease/a', '9', 'release')).toBe(false); // the next holder's version is decided on at once
    w.note('pod/u', '1', 'lift', '3', '2');
    expect(w.size).toBe(0);
  });
});
