// One thin HTTP layer over client-node's authentication: raw GET/POST/PATCH/PUT/DELETE on any API path.
// The generated clients cover typed calls; this covers what they make awkward (server-side apply on a
// status subresource, lists of any resource for informers) with one error type.
import { HttpMethod, type KubeConfig, RequestContext } from '@kubernetes/client-node';
import { fetch } from 'undici';

export const PatchType = {
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  json: 'application/json-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;
export type PatchType = (typeof PatchType)[keyof typeof PatchType];

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

export type Query = Record<string, string | number | boolean | undefined>;

/** Told about every request made (status 0: no response). For the operator's request counter. */
export type RequestObserver = (verb: string, path: string, status: number) => void;

/**
 * The resource an API path addresses, with its subresource: `/api/v1/namespaces/a/pods/p/status` →
 * `pods/status`, `/apis/coordination.k8s.io/v1/namespaces/a/leases` → `leases`, `/api/v1/nodes` → `nodes`.
 */
export function resourceOf(path: string): string {
  const parts = path.split('?')[0]?.split('/').filter(Boolean) ?? [];
  let rest = parts[0] === 'api' ? parts.slice(2) : parts[0] === 'apis' ? parts.slice(3) : parts;
  if (rest[0] === 'namespaces' && rest.length >= 3) rest = rest.slice(2);
  const [resource, , sub] = rest;
  if (!resource) return 'unknown';
  return sub ? `${resource}/${sub}` : resource;
}

export class KubeHttp {
  constructor(
    readonly kubeConfig: KubeConfig,
    private readonly observer?: RequestObserver,
  ) {}

  /** Counts a request made outside `request` (a watch stream opened by an informer). */
  observe(verb: string, path: string, status: number): void {
    this.observer?.(verb, path, status);
  }

  url(path: string, query: Query = {}): URL {
    const cluster = this.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  async request<T>(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    opts: { query?: Query; body?: unknown; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<T> {
    const url = this.url(path, opts.query);
    const ctx = new RequestContext(url.toString(), HttpMethod[method]);
    await this.kubeConfig.applySecurityAuthentication(ctx);
    const headers: Record<string, string> = { ...ctx.getHeaders(), accept: 'application/json' };
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json';
      body = JSON.stringify(opts.body);
    }
    let res;
    try {
      res = await fetch(url, {
        method,
        headers,
        body,
        dispatcher: ctx.getDispatcher(),
        signal: opts.signal ?? AbortSignal.timeout(30_000),
      });
    } catch (err) {
      this.observer?.(method, path, 0);
      throw err;
    }
    this.observer?.(method, path, res.status);
    const text = await res.text();
    if (res.status >= 400) {
      let reason = res.statusText;
      let message = text;
      try {
        const status = JSON.parse(text) as { reason?: string; message?: string };
        reason = status.reason ?? reason;
        message = status.message ?? message;
      } catch {
        // not a Status object: keep the raw body
      }
      throw new KubeApiError(res.status, reason, method, path, message);
    }
    const json = res.headers.get('content-type')?.includes('json') ?? false;
    return (text && json ? JSON.parse(text) : text || undefined) as T;
  }

  get<T>(path: string, query?: Query): Promise<T> {
    return this.request<T>('GET', path, { query });
  }

  patch<T>(path: string, body: unknown, type: PatchType, query?: Query): Promise<T> {
    return this.request<T>('PATCH', path, { body, contentType: type, query });
  }

  /** Server-side apply with our field manager; `force` takes over fields another manager set. */
  apply<T>(path: string, body: unknown, fieldManager: string, force = true): Promise<T> {
    return this.request<T>('PATCH', path, { body, contentType: PatchType.apply, query: { fieldManager, force } });
  }
}
