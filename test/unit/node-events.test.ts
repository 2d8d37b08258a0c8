import { describe, expect, it } from 'vitest';
import { exitTime, parseContainerdEvent, parseKubeletStop, parseProcStat } from '../../hack/lib/node-events.js';

const ID = '4d24b96deb68750ccddd602a66ff42f7483af6d440005641963062c6f5c24e9b';

describe('parseContainerdEvent (ctr events lines, as containerd 2.4 prints them)', () => {
  it.each([
    [
      'a container created',
      `2026-12-01 07:35:05.392214759 +0000 UTC k8s.io /containers/create {"id":"${ID}","image":"registry.k8s.io/pause:3.10.2"}`,
      { t: '2026-12-01T07:35:05.392Z', kind: 'created', containerId: ID },
    ],
    [
      'its task started',
      `2026-12-01 07:35:05.521394916 +0000 UTC k8s.io /tasks/start {"container_id":"${ID}","pid":32046}`,
      { t: '2026-12-01T07:35:05.521Z', kind: 'started', containerId: ID, pid: 32046 },
    ],
    [
      'an exit, timed by exited_at',
      `2026-12-01 07:35:05.176635884 +0000 UTC k8s.io /tasks/exit {"container_id":"${ID}","id":"${ID}","pid":31655,"exit_status":2,"exited_at":{"seconds":1796110505,"nanos":151413867}}`,
      { t: '2026-12-01T07:35:05.151Z', kind: 'exited', containerId: ID, exitCode: 2, pid: 31655 },
    ],
    [
      'an exit with code 0 (left out of the JSON)',
      `2026-12-01 07:35:05.191759472 +0000 UTC k8s.io /tasks/exit {"container_id":"${ID}","id":"${ID}","pid":31626,"exited_at":{"seconds":1796110505,"nanos":179387224}}`,
      { t: '2026-12-01T07:35:05.179Z', kind: 'exited', containerId: ID, exitCode: 0, pid: 31626 },
    ],
  ])('%s', (_what, line, want) => {
    expect(parseContainerdEvent(line)).toEqual(want);
  });

  it.each([
    ['an exec process exiting', `2026-12-01 07:35:05.1 +0000 UTC k8s.io /tasks/exit {"container_id":"${ID}","id":"exec-1","pid":9,"exited_at":{"seconds":1}}`],
    ['another topic', `2026-12-01 07:35:05.1 +0000 UTC k8s.io /snapshot/prepare {"key":"k"}`],
    ['a warning line', 'time="2026-12-01T07:26:56Z" level=warning msg="DEPRECATION: cgroup v1"'],
    ['broken JSON', `2026-12-01 07:35:05.1 +0000 UTC k8s.io /tasks/start {"container_id":`],
  ])('ignores %s', (_what, line) => {
    expect(parseContainerdEvent(line)).toBeUndefined();
  });
});

describe('parseKubeletStop (the kubelet log line before it stops a container)', () => {
  const line =
    'I1201 07:34:08.146612   17887 kuberuntime_container.go:909] "Killing container with a grace period" pod="operator-test/controller-6fddbb6c98-z7jfm" podUID="24ad5d18" containerName="driver" containerID="containerd://4e40" gracePeriod=5';

  it('reads pod, container and the time, in the year of now', () => {
    const got = parseKubeletStop(line, new Date(2026, 11, 1, 8, 0, 0));
    expect(got).toEqual({
      t: new Date(2026, 11, 1, 7, 34, 8, 146).toISOString(),
      namespace: 'operator-test',
      pod: 'controller-6fddbb6c98-z7jfm',
      uid: '24ad5d18',
      container: 'driver',
    });
  });

  it('a December line read in January is from last year', () => {
    expect(parseKubeletStop(line, new Date(2027, 0, 1, 0, 0, 5))?.t).toBe(new Date(2026, 11, 1, 7, 34, 8, 146).toISOString());
  });

  it('ignores every other line', () => {
    expect(parseKubeletStop('I1201 07:34:08.146612   17887 kubelet.go:1] "SyncLoop DELETE" source="api"', new Date())).toBeUndefined();
  });
});

describe('parseProcStat (/proc/<pid>/stat, for exits while containerd is down)', () => {
  const tail = '1 15278 15278 0 -1 4194560 1125 0 0 0 3 1 0 0 20 0 12 0 437215 741376000 4321 18446744073709551615';
  it('reads the state and the start time after the command name, whatever that holds', () => {
    expect(parseProcStat(`15390 (csi-attacher) S ${tail}`)).toEqual({ state: 'S', startTime: '437215' });
    expect(parseProcStat(`15390 (a) (b c) Z ${tail}`)).toEqual({ state: 'Z', startTime: '437215' });
  });
  it('is undefined for what is not a stat line', () => {
    expect(parseProcStat('')).toBeUndefined();
    expect(parseProcStat('15390 (sh) S 1 2')).toBeUndefined();
  });
});

describe('exitTime (the earlier of the runtime’s bound and /proc’s, never before the death)', () => {
  it('containerd: its stamp, when /proc did not show the exit first', () => {
    expect(exitTime('containerd', '2026-12-06T05:16:37.900Z')).toEqual({ t: '2026-12-06T05:16:37.900Z' });
    expect(exitTime('containerd', '2026-12-06T05:16:37.900Z', '2026-12-06T05:16:37.950Z')).toEqual({ t: '2026-12-06T05:16:37.900Z' });
  });

  it('containerd: /proc’s time where it came first (the shim stamps after the reap)', () => {
    expect(exitTime('containerd', '2026-12-06T05:16:37.960Z', '2026-12-06T05:16:37.917Z')).toEqual({
      t: '2026-12-06T05:16:37.917Z',
      source: 'proc',
      runtimeAt: '2026-12-06T05:16:37.960Z',
    });
  });

  it('CRI-O: the exit file’s change time plus a coarse-clock tick, which may date the write a tick early', () => {
    expect(exitTime('crio', '2026-12-06T05:16:37.897Z')).toEqual({ t: '2026-12-06T05:16:37.901Z', runtimeAt: '2026-12-06T05:16:37.897Z' });
  });

  it('CRI-O: a close watch that began after the death does not move the exit later (clean-clone CI, 2026-12-06)', () => {
    // The csi-attacher's record: conmon's exit file at .897, /proc first looked (and found it gone) at .922, the
    // operator's release seen at .920. Judged by /proc's time the release looked 2 ms early.
    const e = exitTime('crio', '2026-12-06T05:16:37.897Z', '2026-12-06T05:16:37.922Z');
    expect(e.t).toBe('2026-12-06T05:16:37.901Z');
    expect(Date.parse('2026-12-06T05:16:37.920Z')).toBeGreaterThanOrEqual(Date.parse(e.t));
  });

  it('CRI-O: /proc’s time where it is earlier than the tick-widened change time', () => {
    expect(exitTime('crio', '2026-12-06T05:16:12.992Z', '2026-12-06T05:16:12.917Z')).toEqual({
      t: '2026-12-06T05:16:12.917Z',
      source: 'proc',
      runtimeAt: '2026-12-06T05:16:12.992Z',
    });
    // Within the tick: /proc’s (a bound no later than the widened one) wins.
    expect(exitTime('crio', '2026-12-06T05:16:12.997Z', '2026-12-06T05:16:12.999Z').t).toBe('2026-12-06T05:16:12.999Z');
  });
});
