// The one clock of the operator: milliseconds since the epoch. Pure functions take `now` as a number; whatever
// needs to read time holds a Clock, so tests pass a fake one.
export type Clock = () => number;
export const systemClock: Clock = () => Date.now();

/** Kubernetes Time (RFC 3339, whole seconds), as conditions and Events carry it. */
export const kubeTime = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
