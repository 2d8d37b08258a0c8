// The operator's own leader election against the real API server, where its shutdown meets its standby's:
// when both replicas go at once (an uninstall, a scale to zero, a node drain), the leader releases the lease and
// the standby, already shutting down, must not take it. Taken, it would start work it is stopping, or die holding
// the lease, and the next replicas would wait out its expiry before any of them leads.
import type { V1Lease } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { LeaderElector } from '../../src/leaderelection/elector.js';
import { makeLogger } from '../../src/log.js';
import { clusterHttp, kubectl, waitFor } from '../../hack/lib/cluster.js';

const http = clusterHttp();
const log = makeLogger('test', 'warn');
const NS = `election-${Date.now().toString(36)}`;
const timings = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
/**
 * How long a released lease is watched for a taker: a standby tries it the moment its watch tells it of the release
 * (milliseconds), and on its own poll within 2.2 retry periods (4.4 s) if the watch were late.
 */
const WINDOW_MS = 6_000;

let electors: LeaderElector[] = [];
const leading = new Set<string>();

function elector(name: string, identity: string): LeaderElector {
  const e = new LeaderElector({
    http,
    namespace: NS,
    name,
    identity,
    timings,
    log,
    onStartedLeading: () => leading.add(identity),
    onStoppedLeading: () => leading.delete(identity),
  });
  electors.push(e);
  e.start();
  return e;
}

const holder = async (name: string) => (await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${name}`)).spec?.holderIdentity ?? '';

/** The holders the lease has had from now until `ms` from now, read every 100 ms. */
async function holdersFor(name: string, ms: number): Promise<Set<string>> {
  const seen = new Set<string>();
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) seen.add(await holder(name));
  return seen;
}

/** A leader `a` and a standby `b`. */
async function pair(name: string): Promise<{ a: LeaderElector; b: LeaderElector }> {
  const a = elector(name, `${name}-a`);
  await waitFor(`${name}-a leads`, 30_000, async () => leading.has(`${name}-a`) && (await holder(name)) === `${name}-a`);
  return { a, b: elector(name, `${name}-b`) };
}

beforeAll(async () => {
  await kubectl('create', 'namespace', NS);
});

afterEach(() => {
  for (const e of electors) e.stop();
  electors = [];
  leading.clear();
});

afterAll(async () => {
  await kubectl('delete', 'namespace', NS, '--wait=false').catch(() => undefined);
});

it('a standby takes a released lease within the window watched below (the control)', async () => {
  const { a } = await pair('control');
  expect(await a.release()).toBe(true);
  const holders = await holdersFor('control', WINDOW_MS);
  expect([...holders]).toContain('control-b');
  expect(leading.has('control-b')).toBe(true);
});

it('a standby shutting down never takes the lease its leader released on the way out: it stays released', async () => {
  const { a, b } = await pair('leaving');
  b.leave();
  expect(await a.release()).toBe(true);
  const holders = await holdersFor('leaving', WINDOW_MS);
  expect([...holders]).toEqual(['']);
  expect(leading.has('leaving-b')).toBe(false);
  expect(await b.release()).toBe(false);
});

it('a leader shutting down keeps renewing until it releases', async () => {
  const { a } = await pair('renewing');
  a.leave();
  const renewTimes = new Set<string>();
  for (const end = Date.now() + 3 * timings.retryPeriodMs; Date.now() < end; await new Promise((r) => setTimeout(r, 200)))
    renewTimes.add((await http.get<V1Lease>(`/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/renewing`)).spec?.renewTime?.toString() ?? '');
  expect(renewTimes.size, 'renewals while leaving').toBeGreaterThanOrEqual(2);
  expect(await holder('renewing')).toBe('renewing-a');
  expect(await a.release()).toBe(true);
  expect(await holder('renewing')).toBe('');
});
