import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/kube/same-content.js';
import { handoverStatus, withHandover } from '../../src/handover/report.js';

/** What the API server hands back for a custom resource: the same content, keys sorted (Go maps), no undefined. */
const asServed = (v: unknown): unknown => JSON.parse(canonicalJson(v));

describe('canonicalJson', () => {
  it("reads our report's status and the one the API server serves back as the same", () => {
    const T = Date.parse('2026-12-01T10:00:00Z');
    const report = withHandover(undefined, {
      namespace: 'csi',
      lease: 'attacher',
      oldHolder: 'a',
      newHolder: 'b',
      stopAt: T,
      releasedAt: T + 50,
      releasedBy: 'operator',
      acquiredAt: T + 90,
      gapMs: 90,
    });
    const ours = handoverStatus(report);
    expect(JSON.stringify(asServed(ours))).not.toBe(JSON.stringify(ours)); // the order does differ
    expect(canonicalJson(asServed(ours))).toBe(canonicalJson(ours));
  });
  it('still tells different content apart', () => {
    expect(canonicalJson({ a: 1, b: [{ y: 2, x: 1 }] })).toBe(canonicalJson({ b: [{ x: 1, y: 2 }], a: 1 }));
    expect(canonicalJson({ a: 1, b: [1, 2] })).not.toBe(canonicalJson({ a: 1, b: [2, 1] }));
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: 2 }));
    expect(canonicalJson({ a: 1, u: undefined })).toBe(canonicalJson({ a: 1 }));
  });
});
