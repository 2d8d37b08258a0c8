// The operator's whole Kubernetes client: raw GET/POST/PATCH/PUT/DELETE and watch streams on any API path,
// over node:https (keep-alive), authenticated as src/kube/config.ts says, with one error type. client-node is used for its
// types only: loading its generated API costs ~85 MiB of RSS (docs/benchmarks.md).
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ClusterAccess } from './config.js';
import { KubeApiError } from './errors.js';

export const PatchType = {
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  json: 'application/json-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;
export type PatchType = (typeof PatchType)[keyof typeof PatchType];

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

/** One event of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR (then `object` is a Status). */
export type WatchHandler = (type: string, object: unknown) => void;

export const REQUEST_TIMEOUT_MS = 30_000;
/**
 * How long a watch may take to open (connection, TLS, the response's headers) before it is given up and tried again.
 * Without it, a connection the API server never answers (one made while it restarts) waits for the kernel: about
 * 2 minutes of SYN retries, or the watch's own idle limit (5 minutes and more). client-go bounds the same steps
 * (a 30 s dial, a 10 s TLS handshake).
 */
export const WATCH_OPEN_TIMEOUT_MS = 10_000;

/** A watch stream's bytes → its non-empty lines (one JSON event each), whatever the chunk boundaries. */
export class LineSplitter {
  private readonly decoder = new TextDecoder();
  private buffered = '';

  push(chunk: Uint8Array): string[] {
    this.buffered += this.decoder.decode(chunk, { stream: true });
    const parts = this.buffered.split('\n');
    this.buffered = parts.pop() ?? '';
    return parts.map((l) => l.trim()).filter(Boolean);
  }
}

interface Response {
  status: number;
  statusText: string;
  body: IncomingMessage;
}

const readAll = async (body: IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};

export class KubeHttp {
  private readonly agent: HttpAgent;
  private readonly send1: typeof httpsRequest;

  constructor(
    private readonly access: ClusterAccess,
    private readonly observer?: RequestObserver,
    shared?: { agent: HttpAgent; send1: typeof httpsRequest },
  ) {
    const tls = new URL(access.server).protocol === 'https:';
    // Keep-alive connections, one per concurrent request or watch (HTTP/1.1, as client-go without HTTP/2).
    this.agent =
      shared?.agent ??
      (tls
        ? new HttpsAgent({
            keepAlive: true,
            ca: access.ca,
            cert: access.cert,
            key: access.key,
            servername: access.serverName,
            rejectUnauthorized: !access.insecureSkipTLSVerify,
          })
        : new HttpAgent({ keepAlive: true }));
    this.send1 = shared?.send1 ?? (tls ? httpsRequest : httpRequest);
  }

  /** The same client (credentials, connections) telling its requests to another observer: requests counted per caller. */
  observedBy(observer: RequestObserver): KubeHttp {
    return new KubeHttp(this.access, observer, { agent: this.agent, send1: this.send1 });
  }

  url(path: string, query: Query = {}): URL {
    const url = new URL(this.access.server + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) url.searchParams.set(k, String(v));
    return url;
  }

  private once(method: string, url: URL, headers: Record<string, string>, body: string | undefined, signal: AbortSignal): Promise<Response> {
    const token = this.access.token.get();
    const all: Record<string, string | number> = token ? { ...headers, authorization: `Bearer ${token}` } : { ...headers };
    if (body !== undefined) all['content-length'] = Buffer.byteLength(body);
    return new Promise((resolve, reject) => {
      const req = this.send1(url, { method, headers: all, agent: this.agent, signal }, (res) =>
        resolve({ status: res.statusCode ?? 0, statusText: res.statusMessage ?? '', body: res }),
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  private async send(method: string, url: URL, headers: Record<string, string>, body: string | undefined, signal: AbortSignal): Promise<Response> {
    const res = await this.once(method, url, headers, body, signal);
    if (res.status !== 401) return res;
    // A rotated token file: read it again now and try once more.
    res.body.resume();
    this.access.token.invalidate();
    return this.once(method, url, headers, body, signal);
  }

  private static async error(res: Response, method: string, path: string): Promise<KubeApiError> {
    const text = await readAll(res.body).catch(() => '');
    let reason = res.statusText;
    let message = text;
    try {
      const status = JSON.parse(text) as { reason?: string; message?: string };
      reason = status.reason ?? reason;
      message = status.message ?? message;
    } catch {
      // not a Status object: keep the raw body
    }
    return new KubeApiError(res.status, reason, method, path, message);
  }

  /**
   * Opens a watch on a collection and hands each event to `onEvent` until the server ends the stream
   * (resolves) or it fails, is aborted, does not open within `openTimeoutMs` (WATCH_OPEN_TIMEOUT_MS) or stays
   * silent for `idleMs` (rejects). Counted as one WATCH request.
   */
  async watch(
    path: string,
    query: Query,
    onEvent: WatchHandler,
    opts: { signal?: AbortSignal; idleMs?: number; openTimeoutMs?: number; onOpen?: () => void } = {},
  ): Promise<void> {
    const url = this.url(path, { ...query, watch: true });
    const abort = new AbortController();
    const onAbort = () => abort.abort(opts.signal?.reason);
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    let idle: NodeJS.Timeout | undefined;
    const alive = () => {
      if (opts.idleMs === undefined) return;
      clearTimeout(idle);
      idle = setTimeout(() => abort.abort(new Error(`watch ${path}: nothing received for ${opts.idleMs} ms`)), opts.idleMs);
    };
    const openTimeoutMs = opts.openTimeoutMs ?? WATCH_OPEN_TIMEOUT_MS;
    const opening = setTimeout(() => abort.abort(new Error(`watch ${path}: not opened within ${openTimeoutMs} ms`)), openTimeoutMs);
    try {
      alive();
      let res;
      try {
        res = await this.send('GET', url, { accept: 'application/json' }, undefined, abort.signal);
      } catch (err) {
        this.observer?.('WATCH', path, 0);
        throw err;
      } finally {
        clearTimeout(opening);
      }
      this.observer?.('WATCH', path, res.status);
      if (res.status >= 400) throw await KubeHttp.error(res, 'WATCH', path);
      opts.onOpen?.();
      const lines = new LineSplitter();
      for await (const chunk of res.body) {
        alive();
        for (const line of lines.push(chunk as Buffer)) {
          const event = JSON.parse(line) as { type?: string; object?: unknown };
          onEvent(event.type ?? '', event.object);
        }
      }
    } catch (err) {
      throw abort.signal.aborted && abort.signal.reason instanceof Error ? abort.signal.reason : err;
    } finally {
      clearTimeout(idle);
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Closes every idle connection; open watches end when their signals abort. */
  close(): void {
    this.agent.destroy();
  }

  async request<T>(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    opts: { query?: Query; body?: unknown; contentType?: string; signal?: AbortSignal } = {},
  ): Promise<T> {
    const url = this.url(path, opts.query);
    const headers: Record<string, string> = { accept: 'application/json' };
    let body: string | undefined;
    if (opts.body !== undefined) {
      headers['content-type'] = opts.contentType ?? 'application/json';
      body = JSON.stringify(opts.body);
    }
    const signal = opts.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS);
    let res;
    let text;
    try {
      res = await this.send(method, url, headers, body, signal);
      if (res.status >= 400) {
        this.observer?.(method, path, res.status);
        throw await KubeHttp.error(res, method, path);
      }
      text = await readAll(res.body);
    } catch (err) {
      if (!(err instanceof KubeApiError)) this.observer?.(method, path, 0);
      throw err;
    }
    this.observer?.(method, path, res.status);
    const json = res.body.headers['content-type']?.includes('json') ?? false;
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
