import type { V1PodSpec } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { planVerbosity, rewritePodSpecVerbosity, rewriteVerbosity, type PodSpecRewrite } from '../../src/loglevel/args.js';

describe('rewriteVerbosity', () => {
  // Inputs are frozen so any in-place edit throws instead of passing silently.
  const rewrite = (args: string[], target: number) => rewriteVerbosity(Object.freeze([...args]), target);

  it.each<[string, string[], number, string[], number[]]>([
    ['--v=N', ['--v=2'], 4, ['--v=4'], [2]],
    ['-v=N', ['-v=2'], 4, ['-v=4'], [2]],
    ['--v N keeps two elements', ['--v', '2'], 4, ['--v', '4'], [2]],
    ['-v N keeps two elements', ['-v', '2'], 4, ['-v', '4'], [2]],
    ['among other flags', ['--csi-address=/csi/csi.sock', '--v=5', '--leader-election'], 2, ['--csi-address=/csi/csi.sock', '--v=2', '--leader-election'], [5]],
    ['a two-digit value', ['--v=10'], 2, ['--v=2'], [10]],
    ['down to zero', ['-v', '8'], 0, ['-v', '0'], [8]],
    ['several occurrences, one already at target', ['--v=2', '-v', '3', '--v=4', '-v=1'], 4, ['--v=4', '-v', '4', '--v=4', '-v=4'], [2, 3, 4, 1]],
    [
      'lookalikes next to the real flag',
      ['--vmodule=controller=3', '--v-foo=1', '-verbose', '--kubeconfig=-v', '--v2', '--v=2'],
      6,
      ['--vmodule=controller=3', '--v-foo=1', '-verbose', '--kubeconfig=-v', '--v2', '--v=6'],
      [2],
    ],
  ])('changes %s', (_situation, args, target, rewritten, from) => {
    expect(rewrite(args, target)).toEqual({ kind: 'changed', args: rewritten, from });
  });

  it.each<[string, string[], number]>([
    ['--v=N at target', ['--v=4'], 4],
    ['-v N at target', ['-v', '4'], 4],
    ['several occurrences all at target', ['--v=4', '-v=4', '--v', '4'], 4],
    ['a leading zero that klog reads as the target', ['--v=04'], 4],
  ])('leaves %s unchanged', (_situation, args, target) => {
    expect(rewrite(args, target)).toEqual({ kind: 'unchanged' });
  });

  it.each<[string[]]>([
    [[]],
    [['--vmodule=controller=4']],
    [['--v-foo=1']],
    [['-verbose']],
    [['--verbosity=4']],
    [['--kubeconfig=-v']],
    [['-vv']],
    [['--v2']],
    [['--V=2']],
    [['v=2']],
    [['---v=2']],
  ])('finds no verbosity flag in %j', (args) => {
    expect(rewrite(args, 4)).toEqual({ kind: 'absent' });
  });

  it.each<[string[], string]>([
    [['--v='], '"--v=" at index 0 does not have a non-negative integer value'],
    [['--csi-address=x', '--v=abc'], '"--v=abc" at index 1 does not have a non-negative integer value'],
    [['--v=-1'], '"--v=-1" at index 0 does not have a non-negative integer value'],
    [['-v=2.5'], '"-v=2.5" at index 0 does not have a non-negative integer value'],
    [['--v= 2'], '"--v= 2" at index 0 does not have a non-negative integer value'],
    [['--v=2', '-v'], '"-v" at index 1 has no value after it'],
    [['--v', 'x'], '"--v" at index 0 is followed by "x", which is not a non-negative integer'],
    [['-v', '-1'], '"-v" at index 0 is followed by "-1", which is not a non-negative integer'],
    [['--v', '--leader-election'], '"--v" at index 0 is followed by "--leader-election", which is not a non-negative integer'],
    [['--v=4', '--v=x'], '"--v=x" at index 1 does not have a non-negative integer value'],
  ])('reports %j as malformed', (args, reason) => {
    expect(rewrite(args, 4)).toEqual({ kind: 'malformed', reason });
  });

  it.each([[-1], [2.5], [Number.NaN]])('refuses target verbosity %d', (target) => {
    expect(() => rewrite(['--v=2'], target)).toThrow(RangeError);
  });

  it('returns a new array and leaves the input as it was', () => {
    const args = ['--v=2', '-v', '3'];
    const result = rewriteVerbosity(args, 4);
    expect(args).toEqual(['--v=2', '-v', '3']);
    expect(result.kind === 'changed' && result.args !== args).toBe(true);
  });
});

describe('planVerbosity', () => {
  const spec: V1PodSpec = {
    initContainers: [
      { name: 'init-perms', image: 'busybox', command: ['chown', '-R', '1000', '/data'] },
      { name: 'init-registration', image: 'driver', args: ['--v=2', '--mode=register'] },
    ],
    containers: [
      { name: 'csi-driver', image: 'driver', args: ['--endpoint=unix:///csi/csi.sock', '--v=2'] },
      { name: 'csi-provisioner', image: 'provisioner', args: ['-v', '6'] },
      { name: 'kube-rbac-proxy', image: 'rbac-proxy', args: ['--secure-listen-address=0.0.0.0:9202', '--upstream=http://127.0.0.1:8202/'] },
      { name: 'flags-in-command', image: 'legacy', command: ['/bin/driver', '--v=2'], args: ['--endpoint=unix:///csi/csi.sock'] },
      { name: 'flags-in-both', image: 'legacy', command: ['/bin/driver', '--v=8'], args: ['--v=2'] },
      { name: 'shell-wrapper', image: 'legacy', command: ['sh', '-c', 'exec /bin/driver --v=2'] },
      { name: 'no-args', image: 'plain' },
      { name: 'broken', image: 'driver', args: ['--v='] },
    ],
  };
  const plans = planVerbosity(spec, 6);

  it('has one entry per container, init containers first', () => {
    expect(plans.map((p) => [p.container, p.init])).toEqual([
      ['init-perms', true],
      ['init-registration', true],
      ['csi-driver', false],
      ['csi-provisioner', false],
      ['kube-rbac-proxy', false],
      ['flags-in-command', false],
      ['flags-in-both', false],
      ['shell-wrapper', false],
      ['no-args', false],
      ['broken', false],
    ]);
  });

  it.each<[string, string, 'args' | 'command', unknown]>([
    ['init container without the flag', 'init-perms', 'args', { kind: 'absent' }],
    ['init container with the flag', 'init-registration', 'args', { kind: 'changed', args: ['--v=6', '--mode=register'], from: [2] }],
    ['flag in args', 'csi-driver', 'args', { kind: 'changed', args: ['--endpoint=unix:///csi/csi.sock', '--v=6'], from: [2] }],
    ['flag already at target', 'csi-provisioner', 'args', { kind: 'unchanged' }],
    ['no flag anywhere', 'kube-rbac-proxy', 'args', { kind: 'absent' }],
    ['flag only in command', 'flags-in-command', 'command', { kind: 'changed', args: ['/bin/driver', '--v=6'], from: [2] }],
    ['flag in both: args wins', 'flags-in-both', 'args', { kind: 'changed', args: ['--v=6'], from: [2] }],
    ['flag inside a shell string', 'shell-wrapper', 'args', { kind: 'absent' }],
    ['neither args nor command', 'no-args', 'args', { kind: 'absent' }],
    ['malformed flag', 'broken', 'args', { kind: 'malformed', reason: '"--v=" at index 0 does not have a non-negative integer value' }],
  ])('%s (%s)', (_situation, container, field, result) => {
    expect(plans.find((p) => p.container === container)).toMatchObject({ field, result });
  });
});

describe('rewritePodSpecVerbosity', () => {
  const rbacProxy = { name: 'kube-rbac-proxy', image: 'rbac-proxy', args: ['--secure-listen-address=0.0.0.0:9202'] };
  const volumes = [{ name: 'socket-dir', emptyDir: {} }];

  it.each<[string, V1PodSpec, PodSpecRewrite]>([
    [
      'rewrites only the containers with the flag and keeps everything else',
      {
        serviceAccountName: 'csi-driver',
        volumes,
        initContainers: [{ name: 'init-registration', image: 'driver', command: ['/bin/driver', '-v', '2'] }],
        containers: [{ name: 'csi-driver', image: 'driver', args: ['--v=2', '--endpoint=unix:///csi/csi.sock'] }, rbacProxy],
      },
      {
        kind: 'changed',
        containers: ['init-registration', 'csi-driver'],
        spec: {
          serviceAccountName: 'csi-driver',
          volumes,
          initContainers: [{ name: 'init-registration', image: 'driver', command: ['/bin/driver', '-v', '4'] }],
          containers: [{ name: 'csi-driver', image: 'driver', args: ['--v=4', '--endpoint=unix:///csi/csi.sock'] }, rbacProxy],
        },
      },
    ],
    [
      'changes nothing when one container is malformed',
      {
        containers: [{ name: 'csi-driver', image: 'driver', args: ['--v=2'] }, { name: 'csi-attacher', image: 'attacher', args: ['--v=abc'] }, rbacProxy],
      },
      { kind: 'malformed', reasons: ['container "csi-attacher": "--v=abc" at index 0 does not have a non-negative integer value'] },
    ],
    [
      'reports every malformed container',
      {
        initContainers: [{ name: 'init', image: 'driver', args: ['-v'] }],
        containers: [{ name: 'csi-driver', image: 'driver', command: ['/bin/driver', '--v', 'x'] }],
      },
      {
        kind: 'malformed',
        reasons: [
          'container "init": "-v" at index 0 has no value after it',
          'container "csi-driver": "--v" at index 1 is followed by "x", which is not a non-negative integer',
        ],
      },
    ],
    [
      'is unchanged when every flag is already at target',
      { containers: [{ name: 'csi-driver', image: 'driver', args: ['--v=4'] }, { name: 'csi-resizer', image: 'resizer', args: ['-v', '4'] }, rbacProxy] },
      { kind: 'unchanged' },
    ],
    ['is unchanged when no container has the flag', { containers: [rbacProxy] }, { kind: 'unchanged' }],
  ])('%s', (_situation, spec, expected) => {
    const before = structuredClone(spec);
    expect(rewritePodSpecVerbosity(spec, 4)).toEqual(expected);
    expect(spec).toEqual(before);
  });

  it('returns a copy that shares nothing with the input', () => {
    const spec: V1PodSpec = { containers: [{ name: 'csi-driver', image: 'driver', args: ['--v=2'] }, rbacProxy] };
    const result = rewritePodSpecVerbosity(spec, 4);
    if (result.kind !== 'changed') throw new Error(`expected a change, got ${result.kind}`);
    expect(result.spec.containers[1]).toEqual(rbacProxy);
    expect(result.spec.containers[1]).not.toBe(rbacProxy);
    expect(result.spec.containers).not.toBe(spec.containers);
  });
});
