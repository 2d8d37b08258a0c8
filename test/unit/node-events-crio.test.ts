import { describe, expect, it } from 'vitest';
import { jsonObjectSplitter, parseCrictlInspectPid, parseCrioEvent } from '../../hack/lib/crio-events.js';

// Real output of crictl 1.36.0 `events -o json` from CRI-O 1.36.3 (hack/bins/crio/standalone-proof.sh: a pod with a
// sleeper, stopped with a 2 s grace it ignores, and a csi-attacher that runs to completion), trimmed to the fields
// the parser reads; layout and values as printed (protojson: two spaces after a colon, int64 as strings).
const EVENT = {
  sandboxStarted: `{
  "containerId":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
  "containerEventType":  "CONTAINER_STARTED_EVENT",
  "createdAt":  "1796522644662596412",
  "podSandboxStatus":  {
    "id":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
    "metadata":  {
      "name":  "try-pod",
      "uid":  "7c0ffee0-0000-4000-8000-000000000002",
      "namespace":  "crio-try",
      "attempt":  0
    },
    "state":  "SANDBOX_READY"
  },
  "containersStatuses":  []
}`,
  sleeperCreated: `{
  "containerId":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
  "containerEventType":  "CONTAINER_CREATED_EVENT",
  "createdAt":  "1796522644863148425",
  "podSandboxStatus":  {
    "id":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
    "metadata":  {
      "name":  "try-pod",
      "uid":  "7c0ffee0-0000-4000-8000-000000000002",
      "namespace":  "crio-try",
      "attempt":  0
    },
    "state":  "SANDBOX_READY"
  },
  "containersStatuses":  [
    {
      "id":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
      "metadata":  {
        "name":  "sleeper"
      },
      "state":  "CONTAINER_CREATED",
      "startedAt":  "0",
      "finishedAt":  "0",
      "exitCode":  0
    }
  ]
}`,
  sleeperStarted: `{
  "containerId":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
  "containerEventType":  "CONTAINER_STARTED_EVENT",
  "createdAt":  "1796522644958978369",
  "podSandboxStatus":  {
    "id":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
    "metadata":  {
      "name":  "try-pod",
      "uid":  "7c0ffee0-0000-4000-8000-000000000002",
      "namespace":  "crio-try",
      "attempt":  0
    },
    "state":  "SANDBOX_READY"
  },
  "containersStatuses":  [
    {
      "id":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
      "metadata":  {
        "name":  "sleeper"
      },
      "state":  "CONTAINER_RUNNING",
      "startedAt":  "1796522644936965750",
      "finishedAt":  "0",
      "exitCode":  0
    }
  ]
}`,
  attacherStopped: `{
  "containerId":  "f409fccca070a6e1af861ed41c4e5b7c45f02ddcb59053ef9c4203220d4efc3e",
  "containerEventType":  "CONTAINER_STOPPED_EVENT",
  "createdAt":  "1796522645479619847",
  "podSandboxStatus":  {
    "id":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
    "metadata":  {
      "name":  "try-pod",
      "uid":  "7c0ffee0-0000-4000-8000-000000000002",
      "namespace":  "crio-try",
      "attempt":  0
    },
    "state":  "SANDBOX_READY"
  },
  "containersStatuses":  [
    {
      "id":  "f409fccca070a6e1af861ed41c4e5b7c45f02ddcb59053ef9c4203220d4efc3e",
      "metadata":  {
        "name":  "csi-attacher"
      },
      "state":  "CONTAINER_EXITED",
      "startedAt":  "1796522645301601725",
      "finishedAt":  "1796522645414554473",
      "exitCode":  0
    },
    {
      "id":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
      "metadata":  {
        "name":  "sleeper"
      },
      "state":  "CONTAINER_RUNNING",
      "startedAt":  "1796522644936965750",
      "finishedAt":  "0",
      "exitCode":  0
    }
  ]
}`,
  sleeperStopped: `{
  "containerId":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
  "containerEventType":  "CONTAINER_STOPPED_EVENT",
  "createdAt":  "1796522650238448832",
  "podSandboxStatus":  {
    "id":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
    "metadata":  {
      "name":  "try-pod",
      "uid":  "7c0ffee0-0000-4000-8000-000000000002",
      "namespace":  "crio-try",
      "attempt":  0
    },
    "state":  "SANDBOX_READY"
  },
  "containersStatuses":  [
    {
      "id":  "f409fccca070a6e1af861ed41c4e5b7c45f02ddcb59053ef9c4203220d4efc3e",
      "metadata":  {
        "name":  "csi-attacher"
      },
      "state":  "CONTAINER_EXITED",
      "startedAt":  "1796522645301601725",
      "finishedAt":  "1796522645414554473",
      "exitCode":  0
    },
    {
      "id":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
      "metadata":  {
        "name":  "sleeper"
      },
      "state":  "CONTAINER_EXITED",
      "startedAt":  "1796522644936965750",
      "finishedAt":  "1796522650187167313",
      "exitCode":  137
    }
  ]
}`,
  sleeperDeleted: `{
  "containerId":  "2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e",
  "containerEventType":  "CONTAINER_DELETED_EVENT",
  "createdAt":  "1796522650922781743",
  "podSandboxStatus":  {
    "id":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
    "metadata":  {
      "name":  "try-pod",
      "uid":  "7c0ffee0-0000-4000-8000-000000000002",
      "namespace":  "crio-try",
      "attempt":  0
    },
    "state":  "SANDBOX_READY"
  },
  "containersStatuses":  [
    {
      "id":  "f409fccca070a6e1af861ed41c4e5b7c45f02ddcb59053ef9c4203220d4efc3e",
      "metadata":  {
        "name":  "csi-attacher"
      },
      "state":  "CONTAINER_EXITED",
      "startedAt":  "1796522645301601725",
      "finishedAt":  "1796522650867647545",
      "exitCode":  0
    }
  ]
}`,
  sandboxStopped: `{
  "containerId":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
  "containerEventType":  "CONTAINER_STOPPED_EVENT",
  "createdAt":  "1796522651027089745",
  "podSandboxStatus":  {
    "id":  "41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b",
    "metadata":  {
      "name":  "try-pod",
      "uid":  "7c0ffee0-0000-4000-8000-000000000002",
      "namespace":  "crio-try",
      "attempt":  0
    },
    "state":  "SANDBOX_NOTREADY"
  },
  "containersStatuses":  []
}`,
};
const POD_ID = '41dc1bddb3b5bdabc9a76403b750847cbc9bc86167f9b2081d1752a337556b8b';
const SLEEPER = '2e9699bc5b81fd02fbda7675608d8d8af770c4bb6881d4cccf5ddf3b8ec2f79e';
const ATTACHER = 'f409fccca070a6e1af861ed41c4e5b7c45f02ddcb59053ef9c4203220d4efc3e';
const POD = { namespace: 'crio-try', pod: 'try-pod', uid: '7c0ffee0-0000-4000-8000-000000000002' };
/** crictl prints each event with fmt.Println: the object, then a newline. */
const STREAM = Object.values(EVENT)
  .map((e) => `${e}\n`)
  .join('');

const iso = (ns: string): string => new Date(Number(BigInt(ns) / 1_000_000n)).toISOString();

describe('jsonObjectSplitter (crictl events -o json: pretty-printed objects, one after the other)', () => {
  it.each([1, 7, 4096, STREAM.length])('cuts the stream into its events, whatever the chunks (%i characters)', (size) => {
    const split = jsonObjectSplitter();
    const got: string[] = [];
    for (let i = 0; i < STREAM.length; i += size) got.push(...split(STREAM.slice(i, i + size)));
    expect(got).toEqual(Object.values(EVENT));
  });

  it('counts braces outside strings only', () => {
    const event = '{\n  "message":  "a } and a \\" and a {",\n  "x":  {\n    "y":  "\\\\"\n  }\n}';
    const split = jsonObjectSplitter();
    expect([...split(event.slice(0, 20)), ...split(`${event.slice(20)}\n`)]).toEqual([event]);
    expect(JSON.parse(event)).toEqual({ message: 'a } and a " and a {', x: { y: '\\' } });
  });

  it("skips a line that is not JSON (crictl's own), and a broken event does not swallow the next", () => {
    const split = jsonObjectSplitter();
    const noise = 'failed to format container event with the error: {"oops\n';
    const broken = '{\n  "containerId":  "abc",\n  "podSandboxStatus":  {\n';
    expect(split(`${noise}${EVENT.sandboxStarted}\n${broken}${EVENT.sandboxStopped}\n`)).toEqual([EVENT.sandboxStarted, EVENT.sandboxStopped]);
  });
});

describe('parseCrioEvent (one event of crictl events -o json)', () => {
  it.each([
    ["the pod's sandbox started: the event's time", EVENT.sandboxStarted, { t: iso('1796522644662596412'), kind: 'started', containerId: POD_ID, owner: POD }],
    [
      'a container created',
      EVENT.sleeperCreated,
      { t: iso('1796522644863148425'), kind: 'created', containerId: SLEEPER, owner: { ...POD, container: 'sleeper' } },
    ],
    [
      "a container started: its status's startedAt, not the later event time",
      EVENT.sleeperStarted,
      { t: iso('1796522644936965750'), kind: 'started', containerId: SLEEPER, owner: { ...POD, container: 'sleeper' } },
    ],
    [
      'a container that ran to completion: its finishedAt and exit code 0',
      EVENT.attacherStopped,
      { t: iso('1796522645414554473'), kind: 'exited', containerId: ATTACHER, exitCode: 0, owner: { ...POD, container: 'csi-attacher' } },
    ],
    [
      'a container killed (137): its own status, not the other container listed before it',
      EVENT.sleeperStopped,
      { t: iso('1796522650187167313'), kind: 'exited', containerId: SLEEPER, exitCode: 137, owner: { ...POD, container: 'sleeper' } },
    ],
    ["the pod's sandbox stopped: no exit code", EVENT.sandboxStopped, { t: iso('1796522651027089745'), kind: 'exited', containerId: POD_ID, owner: POD }],
  ])('%s', (_what, text, want) => {
    expect(parseCrioEvent(text)).toEqual(want);
  });

  it('the times are the ones printed, to the millisecond', () => {
    expect(parseCrioEvent(EVENT.sleeperStopped)?.t).toBe('2026-12-06T02:04:10.187Z');
  });

  it('skips a deletion, whose statuses carry finished times CRI-O rewrote (here the attacher’s, 5 s later)', () => {
    expect(parseCrioEvent(EVENT.sleeperDeleted)).toBeUndefined();
    expect(EVENT.sleeperDeleted).toContain('"finishedAt":  "1796522650867647545"');
  });

  it('falls back to the event time when a status has no time, and leaves an unknown exit code (-1) out', () => {
    const stopped = EVENT.attacherStopped.replace('"1796522645414554473"', '"0"').replace('"exitCode":  0', '"exitCode":  -1');
    expect(parseCrioEvent(stopped)).toEqual({
      t: iso('1796522645479619847'),
      kind: 'exited',
      containerId: ATTACHER,
      owner: { ...POD, container: 'csi-attacher' },
    });
  });

  it.each([
    ['broken JSON', EVENT.sleeperStarted.slice(0, 200)],
    ['no sandbox status', '{"containerId": "x", "containerEventType": "CONTAINER_STARTED_EVENT", "createdAt": "1"}'],
    [
      'a container not among the statuses',
      EVENT.sleeperStarted.replaceAll(SLEEPER, 'e'.repeat(64)).replace(`"containerId":  "${'e'.repeat(64)}"`, `"containerId":  "${SLEEPER}"`),
    ],
  ])('is undefined for %s', (_what, text) => {
    expect(parseCrioEvent(text)).toBeUndefined();
  });
});

describe('parseCrictlInspectPid (crictl inspect / inspectp -o json)', () => {
  it("reads a container's pid from info (real output, trimmed)", () => {
    const inspect = `{
  "info": {
    "pid": 17268,
    "privileged": false,
    "runtimeSpec": {
      "ociVersion": "1.3.0"
    },
    "sandboxID": "18de8ac5ee631be67ca769f35562f0210c305ddd138e715914806dd085d96589"
  },
  "status": {
    "id": "0921f14dc3bf99b7742bb6ad80a0d706c0becb16bc0989b0c142e0498104eb03",
    "state": "CONTAINER_RUNNING"
  }
}`;
    expect(parseCrictlInspectPid(inspect)).toBe(17268);
  });

  it('is undefined for a sandbox without an infra process (drop_infra_ctr: only its spec) or what is not JSON', () => {
    expect(parseCrictlInspectPid('{\n  "info": {\n    "runtimeSpec": {}\n  },\n  "status": {}\n}')).toBeUndefined();
    expect(parseCrictlInspectPid('time="…" level=fatal msg="no such container"')).toBeUndefined();
  });
});
