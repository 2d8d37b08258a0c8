// The API server's refusals, as one error type and the questions asked of it.
/** An API error with the HTTP status, the Status reason and the request that failed. */
export class KubeApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly method: string,
    readonly path: string,
    message: string,
  ) {
    super(`${method} ${path}: ${status} ${reason}: ${message}`);
    this.name = 'KubeApiError';
  }
}

export const isConflict = (err: unknown): boolean => err instanceof KubeApiError && err.status === 409;
export const isNotFound = (err: unknown): boolean => err instanceof KubeApiError && err.status === 404;
export const isForbidden = (err: unknown): boolean => err instanceof KubeApiError && err.status === 403;

/**
 * Why the API server refused a write, for the refusals a retry of the same write cannot mend: the object is gone
 * (404), it changed since it was read (409), the writer may not (403), or the object written is invalid (422 —
 * for a JSON patch with a test op, that test failing: the object changed). Anything else (a timeout, a 5xx, no
 * answer) is worth a retry with backoff: undefined.
 */
export type WriteRefusal = 'gone' | 'changed' | 'forbidden' | 'invalid';
export function refusalOf(err: unknown): WriteRefusal | undefined {
  if (!(err instanceof KubeApiError)) return undefined;
  if (err.status === 404) return 'gone';
  if (err.status === 409) return 'changed';
  if (err.status === 403) return 'forbidden';
  if (err.status === 422) return 'invalid';
  return undefined;
}
