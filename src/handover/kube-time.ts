// Kubernetes timestamps as the operator meets them: RFC 3339 strings off the wire (our informers hand over raw
// JSON), or Date objects where a typed client deserialised them, whatever the generated types claim.

// RFC 3339 only: Date.parse alone accepts many other shapes ("Jan 2 2026"), which no API server writes.
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;

/** Milliseconds since the epoch of a Time or MicroTime value, or undefined when it is absent or not one. */
export function parseKubeTime(value: unknown): number | undefined {
  if (value instanceof Date) return Number.isFinite(value.getTime()) ? value.getTime() : undefined;
  if (typeof value !== 'string' || !RFC3339.test(value)) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}
