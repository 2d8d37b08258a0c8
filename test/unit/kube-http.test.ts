import { describe, expect, it } from 'vitest';
import { LineSplitter, resourceOf } from '../../src/kube/http.js';

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
