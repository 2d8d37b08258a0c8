// Comparing what we want with what the API server serves: it serves a custom resource's keys sorted and a
// built-in object's in its own field order, so a comparison by JSON text must not depend on key order.

/** JSON with every object's keys sorted (arrays keep their order): equal text for equal content. */
export function canonicalJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x,
  );
}

export const sameContent = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);
