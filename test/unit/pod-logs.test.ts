import { describe, expect, it } from 'vitest';
import { parseCriLogLine } from '../../hack/lib/pod-logs.js';

describe('parseCriLogLine (the kubelet’s container log format)', () => {
  it.each([
    [
      'a full stdout line',
      '2026-12-01T07:34:08.146612345Z stdout F {"msg":"reconcile start"}',
      { t: Date.parse('2026-12-01T07:34:08.146Z'), text: '{"msg":"reconcile start"}', full: true },
    ],
    [
      'a partial stderr line',
      '2026-12-01T07:34:08.146612345Z stderr P half of a ',
      { t: Date.parse('2026-12-01T07:34:08.146Z'), text: 'half of a ', full: false },
    ],
    ['an empty line', '2026-12-01T07:34:08.146612345Z stdout F ', { t: Date.parse('2026-12-01T07:34:08.146Z'), text: '', full: true }],
  ])('%s', (_what, line, want) => {
    expect(parseCriLogLine(line)).toEqual(want);
  });

  it('ignores what is not a CRI log line', () => {
    expect(parseCriLogLine('{"msg":"raw"}')).toBeUndefined();
    expect(parseCriLogLine('yesterday stdout F text')).toBeUndefined();
  });
});
