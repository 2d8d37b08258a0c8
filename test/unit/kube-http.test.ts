import { createServer, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { KubeApiError, refusalOf } from '../../src/kube/errors.js';
import { KubeHttp, LineSplitter, resourceOf } from '../../src/kube/http.js';

describe('refusalOf (one answer to every refused write)', () => {
  it.each([
    [404, 'gone'],
    [409, 'changed'],
    [422, 'invalid'],
    [403, 'forbidden'],
    [500, undefined],
    [429, undefined],
  ])('%i → %s', (status, refusal) => {
    expect(refusalOf(new KubeApiError(status, 'Reason', 'PUT', '/x', 'm'))).toBe(refusal);
  });
  it('no answer at all (a timeout, a reset) is worth a retry', () => {
    expect(refusalOf(new Error('socket hang up'))).toBeUndefined();
  });
});

describe('resourceOf', () => {
  it.each([
    ['/api/v1/namespaces/a/pods/p/status', 'pods/status'],
    ['/api/v1/namespaces/a/pods/p', 'pods'],
    ['/api/v1/namespaces/a/pods', 'pods'],
    ['/api/v1/pods', 'pods'],
    ['/api/v1/nodes/n', 'nodes'],
    ['/api/v1/namespaces/a', 'namespaces'],
    ['/api/v1/namespaces', 'namespaces'],
    ['/apis/coordination.k8s.io/v1/namespaces/a/leases/l', 'leases'],
    ['/apis/apps/v1/namespaces/a/deployments/d/scale', 'deployments/scale'],
    ['/apis/operator.openshift.io/v1/clustercsidrivers/x/status', 'clustercsidrivers/status'],
    ['/apis/events.k8s.io/v1/namespaces/default/events?limit=1', 'events'],
    ['/', 'unknown'],
  ])('%s → %s', (path, want) => {
    expect(resourceOf(path)).toBe(want);
  });
});

describe('LineSplitter', () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  it('yields whole lines whatever the chunk boundaries, a multi-byte character split included', () => {
    const bytes = enc('{"type":"ADDED","object":{"n":"é"}}\n\n{"type":"BOOKMARK"}\n{"type":"MOD');
    const l = new LineSplitter();
    const out: string[] = [];
    for (let i = 0; i < bytes.length; i += 3) out.push(...l.push(bytes.slice(i, i + 3)));
    expect(out).toEqual(['{"type":"ADDED","object":{"n":"é"}}', '{"type":"BOOKMARK"}']);
    expect(l.push(enc('IFIED"}\n'))).toEqual(['{"type":"MODIFIED"}']);
  });
});

describe('KubeHttp.watch', () => {
  it('gives up a watch whose peer accepts the connection and never answers, once its open timeout has passed', async () => {
    // A peer that takes connections and says nothing (as an API server that listens but does not serve yet).
    const sockets: Socket[] = [];
    const silent = createServer((s) => void sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as { port: number };
    const codes: number[] = [];
    const http = new KubeHttp(
      { server: `http://127.0.0.1:${port}`, insecureSkipTLSVerify: false, token: { get: () => undefined, invalidate: () => undefined } },
      (_verb, _path, code) => codes.push(code),
    );
    try {
      const started = Date.now();
      await expect(http.watch('/api/v1/pods', {}, () => undefined, { openTimeoutMs: 200, idleMs: 60_000 })).rejects.toThrow(/not opened within 200 ms/);
      expect(Date.now() - started).toBeLessThan(5_000); // the idle limit (60 s) did not decide it
      expect(codes).toEqual([0]);
      expect(sockets.length).toBe(1);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });
});
