// make bench-cache: what one cached pod and node cost in the operator's heap, as served by the API, without
// managedFields (what the operator cached until 2026-12), and in the form decisions read (src/handover/cached.ts).
// The objects are a real CSI controller pod (the sample hostpath driver's, six containers) and a real node, from
// the local cluster (hack/bench/fixtures/), parsed from JSON as a watch delivers them, COUNT copies each.
// Run with --expose-gc: the heap is measured after full collections.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { nodeForCache, podForCache } from '../../src/handover/cached.js';
import { withoutManagedFields } from '../../src/kube/informer.js';
import { repoRoot } from '../lib/cluster.js';

const COUNT = Number(process.env.CACHE_COUNT ?? 2000);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc (make bench-cache does)');

const fixture = (name: string) => readFileSync(join(repoRoot, 'hack', 'bench', 'fixtures', name), 'utf8');
const pod = JSON.stringify(JSON.parse(fixture('controller-pod.json')));
const node = JSON.stringify(JSON.parse(fixture('node.json')));

/** Heap bytes per object kept: COUNT distinct copies parsed from JSON, transformed, held in a Map. */
function perObject<T extends { metadata?: { name?: string; uid?: string; resourceVersion?: string } }>(json: string, transform: (o: T) => T): number {
  const held = new Map<string, T>();
  gc?.();
  gc?.();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < COUNT; i++) {
    // Distinct strings per copy, as distinct objects from a watch have.
    const o = JSON.parse(json.replace(/"uid":"[^"]*"/, `"uid":"uid-${i}"`).replace(/"resourceVersion":"[^"]*"/, `"resourceVersion":"${1000 + i}"`)) as T;
    held.set(String(i), transform(o));
  }
  gc?.();
  gc?.();
  const after = process.memoryUsage().heapUsed;
  if (held.size !== COUNT) throw new Error('lost objects');
  return (after - before) / COUNT;
}

const same = <T>(o: T) => o;
const rows: [string, number, number, number][] = [
  ['pod (CSI controller, 6 containers)', perObject<V1Pod>(pod, same), perObject<V1Pod>(pod, withoutManagedFields), perObject<V1Pod>(pod, podForCache)],
  ['node (real kubelet)', perObject<V1Node>(node, same), perObject<V1Node>(node, withoutManagedFields), perObject<V1Node>(node, nodeForCache)],
];
const kib = (b: number) => `${(b / 1024).toFixed(1)} KiB`;
console.log(`== bench-cache: V8 heap per cached object (${COUNT} copies each, after full GC)`);
console.log(`  ${'object'.padEnd(36)}  ${'as served'.padStart(10)}  ${'no managedFields'.padStart(16)}  ${'cached form'.padStart(11)}  cached / as served`);
for (const [what, full, noMf, cached] of rows) {
  console.log(
    `  ${what.padEnd(36)}  ${kib(full).padStart(10)}  ${kib(noMf).padStart(16)}  ${kib(cached).padStart(11)}  ${(cached / full).toFixed(2)}× (${(cached / noMf).toFixed(2)}× of no managedFields)`,
  );
}
const [p] = rows;
if (p) console.log(`  5,000 such pods: ${((p[2] * 5000) / 1048576).toFixed(1)} MiB without managedFields, ${((p[3] * 5000) / 1048576).toFixed(1)} MiB cached.`);
