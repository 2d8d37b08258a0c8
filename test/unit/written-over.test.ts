import { describe, expect, it } from 'vitest';
import { WrittenOver } from '../../src/kube/written-over.js';

describe('WrittenOver', () => {
  it('knows the very write on the very version, for a while, until a new version arrives', () => {
    let now = 0;
    const w = new WrittenOver(5000, () => now);
    w.note('pod/u', '7', 'cost 100');
    expect(w.has('pod/u', '7', 'cost 100')).toBe(true);
    expect(w.has('pod/u', '8', 'cost 100')).toBe(false); // another version: decide on it
    expect(w.has('pod/u', '7', 'lift')).toBe(false); // another write: do it
    expect(w.has('pod/v', '7', 'cost 100')).toBe(false);
    now = 4999;
    expect(w.has('pod/u', '7', 'cost 100')).toBe(true);
    now = 5000; // the watch should have brought the successor by now: trust the cache again
    expect(w.has('pod/u', '7', 'cost 100')).toBe(false);
    w.note('pod/u', '9', 'x');
    w.forget('pod/u');
    expect(w.has('pod/u', '9', 'x')).toBe(false);
    w.note('pod/u', undefined, 'x'); // no version, nothing to compare with: never skipped
    expect(w.has('pod/u', undefined, 'x')).toBe(false);
  });
});
