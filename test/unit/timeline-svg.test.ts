import { describe, expect, it } from 'vitest';
import type { ProbeOp } from '../../src/report/probe-stats.js';
import { duration, renderTimeline, shortener, type TimelineInput } from '../../src/report/timeline-svg.js';

const T0 = Date.parse('2026-01-02T03:04:00Z');
const OLD = 'csi-hostpath-controller-5b8c9-aaaaa';
const NEW = 'csi-hostpath-controller-7d9f1-bbbbb';

const rollout = (over: Partial<TimelineInput> = {}): TimelineInput => ({
  title: 'upstream, 2 replicas',
  from: T0,
  to: T0 + 60_000,
  leases: [
    {
      label: 'external-attacher',
      segments: [
        { holder: OLD, from: T0, to: T0 + 20_000 },
        { holder: NEW, from: T0 + 20_700, to: T0 + 60_000 },
      ],
      gaps: [{ from: T0 + 20_000, to: T0 + 20_700 }],
    },
    { label: 'external-provisioner', segments: [{ holder: OLD, from: T0, to: T0 + 10_000 }], gaps: [{ from: T0 + 10_000, to: T0 + 60_000 }] },
  ],
  stops: [{ pod: OLD, at: T0 + 19_500 }],
  ...over,
});

const all = (svg: string, re: RegExp): string[] => [...svg.matchAll(re)].map((m) => m[1] ?? '');
const count = (svg: string, fragment: string): number => svg.split(fragment).length - 1;
const ticks = (svg: string): string[] => all(svg, /<text class="tick"[^>]*>([^<]*)<\/text>/g);

const TAG = /<(\/?)([A-Za-z][\w:-]*)[^<>]*?(\/?)>/g;
/** Every opened element is closed, in order, and no `<` or `>` is left outside a tag (unescaped text). */
function balanced(svg: string): boolean {
  const open: string[] = [];
  for (const [, closing, name = '', selfClosing] of svg.matchAll(TAG)) {
    if (closing === '/') {
      if (open.pop() !== name) return false;
    } else if (selfClosing !== '/') {
      open.push(name);
    }
  }
  return open.length === 0 && !/[<>]/.test(svg.replace(TAG, ''));
}

describe('renderTimeline', () => {
  it('is one well-formed SVG document', () => {
    const svg = renderTimeline(rollout({ ops: [{ kind: 'provision', name: 'pvc-1', submittedAt: T0 + 1_000, doneAt: T0 + 2_000 }] }));
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(count(svg, '<svg')).toBe(1);
    expect(balanced(svg)).toBe(true);
  });

  it('has a balance check that catches what it should', () => {
    expect(balanced('<svg><g></svg>')).toBe(false);
    expect(balanced('<svg><text>a < b</text></svg>')).toBe(false);
    expect(balanced('<svg><g><rect/></g></svg>')).toBe(true);
  });

  it('draws one bar per segment, skipping segments wholly outside the window', () => {
    expect(count(renderTimeline(rollout()), 'class="segment"')).toBe(3);
    const outside = rollout();
    outside.leases[1]?.segments.push({ holder: NEW, from: T0 + 70_000, to: T0 + 80_000 });
    expect(count(renderTimeline(outside), 'class="segment"')).toBe(3);
  });

  it('colours each holder the same in every lease, and different holders differently', () => {
    const fills = all(renderTimeline(rollout()), /<rect class="segment"[^>]*fill="([^"]+)"/g);
    expect(fills).toHaveLength(3);
    const [oldAttacher, newAttacher, oldProvisioner] = fills;
    expect(oldAttacher).toBe(oldProvisioner);
    expect(newAttacher).not.toBe(oldAttacher);
  });

  it('marks each gap and labels its duration', () => {
    const svg = renderTimeline(rollout());
    expect(count(svg, 'class="gap"')).toBe(2);
    expect(all(svg, /<text class="gap-label"[^>]*>([^<]*)<\/text>/g)).toEqual(['0.7s', '50.0s']);
    const long = renderTimeline(rollout({ to: T0 + 400_000, leases: [{ label: 'l', segments: [], gaps: [{ from: T0 + 1_000, to: T0 + 139_000 }] }] }));
    expect(all(long, /<text class="gap-label"[^>]*>([^<]*)<\/text>/g)).toEqual(['2m 18s']);
  });

  it('has a legend of the holders in the order they held, without their common prefix', () => {
    const svg = renderTimeline(rollout());
    expect(all(svg, /<g class="legend-entry">.*?<text[^>]*>([^<]*)<title>/g)).toEqual(['5b8c9-aaaaa', '7d9f1-bbbbb']);
  });

  it('draws a dashed line per stop, named after the short pod', () => {
    const svg = renderTimeline(rollout());
    expect(count(svg, '<g class="stop">')).toBe(1);
    expect(svg).toContain('>SIGTERM 5b8c9-aaaaa</text>');
  });

  it('escapes text for XML', () => {
    const svg = renderTimeline(
      rollout({ title: 'a <b> & "c"', leases: [{ label: "x<y>&z'", segments: [{ holder: '<pod>&', from: T0, to: T0 + 1_000 }], gaps: [] }] }),
    );
    expect(svg).toContain('>a &lt;b&gt; &amp; &quot;c&quot;</text>');
    expect(svg).toContain('>x&lt;y&gt;&amp;z&apos;</text>');
    expect(svg).not.toContain('<b>');
    expect(svg).not.toContain('<pod>');
    expect(balanced(svg)).toBe(true);
  });

  it('has probe rows only when ops are given, one per kind present, in kind order', () => {
    expect(renderTimeline(rollout())).not.toContain('ops-row');
    expect(renderTimeline(rollout({ ops: [] }))).not.toContain('ops-row');
    const ops: ProbeOp[] = [
      { kind: 'snapshot', name: 'snap-1', submittedAt: T0 + 1_000, doneAt: T0 + 2_000 },
      { kind: 'provision', name: 'pvc-1', submittedAt: T0 + 19_000, doneAt: T0 + 30_000 },
      { kind: 'provision', name: 'pvc-2', submittedAt: T0 + 40_000 },
    ];
    const svg = renderTimeline(rollout({ ops }));
    expect(all(svg, /<g class="ops-row" data-kind="(\w+)">/g)).toEqual(['provision', 'snapshot']);
    expect(all(svg, /<line class="(op[^"]*)"/g)).toEqual(['op slow', 'op unfinished', 'op']);
  });

  it('runs an unfinished op to the end of the picture', () => {
    const svg = renderTimeline(rollout({ ops: [{ kind: 'attach', name: 'va-1', submittedAt: T0 + 30_000 }] }));
    const [end] = all(svg, /<line class="op unfinished"[^>]*x2="([\d.]+)"/g);
    const [axisEnd] = all(svg, /<line class="axis"[^>]*x2="([\d.]+)"/g);
    expect(end).toBe(axisEnd);
  });

  it.each<[string, number, string[]]>([
    ['2s', 2_000, ['0s', '0.2s', '0.4s', '0.6s', '0.8s', '1s', '1.2s', '1.4s', '1.6s', '1.8s', '2s']],
    ['60s', 60_000, ['0s', '10s', '20s', '30s', '40s', '50s', '60s']],
    ['400s', 400_000, ['0s', '60s', '120s', '180s', '240s', '300s', '360s']],
  ])('picks axis ticks for a %s span', (_span, spanMs, want) => {
    expect(ticks(renderTimeline(rollout({ to: T0 + spanMs })))).toEqual(want);
  });
});

describe('duration', () => {
  it.each([
    [700, '0.7s'],
    [0, '0.0s'],
    [59_940, '59.9s'],
    [59_960, '1m 0s'],
    [138_000, '2m 18s'],
  ])('%i ms → %s', (ms, want) => expect(duration(ms)).toBe(want));
});

describe('shortener', () => {
  it.each<[string, string[], string[]]>([
    ['strips the shared words', [OLD, NEW], ['5b8c9-aaaaa', '7d9f1-bbbbb']],
    ['a lone name keeps its last word', [OLD], ['aaaaa']],
    ['cuts only at a dash', ['ctrl-abc', 'ctrl-abd'], ['abc', 'abd']],
    ['nothing shared, nothing stripped', ['alpha', 'beta'], ['alpha', 'beta']],
    ['never the whole of a name', ['ctrl-a', 'ctrl-a-b'], ['a', 'a-b']],
  ])('%s', (_case, names, want) => {
    const short = shortener(names);
    expect(names.map(short)).toEqual(want);
  });
});
