// Where the API server is and how to authenticate to it: the pod's service account here, a kubeconfig file
// in kubeconfig.ts (loaded only when one is given: a pod never pays for its YAML parser).
// Our own, so the operator never loads client-node's generated API at run time (~85 MiB of RSS before a
// single object, docs/benchmarks.md). What is supported is what an operator needs: a CA, client
// certificates, bearer tokens (inline or a file re-read as the kubelet rotates it); anything else
// (exec plugins, auth providers, basic auth) is refused with a clear error rather than half-done.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** How to reach and authenticate to one API server. Secrets are read from files when a request needs them. */
export interface ClusterAccess {
  server: string;
  ca?: string;
  /** Client certificate and key, PEM. */
  cert?: string;
  key?: string;
  /** The TLS server name to verify, when it differs from the server URL's host. */
  serverName?: string;
  insecureSkipTLSVerify: boolean;
  /** A bearer token, or undefined for none; re-read from its file at most once a minute. */
  token: TokenSource;
}

export interface TokenSource {
  get(): string | undefined;
  /** The server said 401: read the file again on the next `get`, whatever its age. */
  invalidate(): void;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** client-go re-reads a service account token file after a minute (cachingTokenSource); so do we. */
export const TOKEN_REREAD_MS = 60_000;

export const noToken: TokenSource = { get: () => undefined, invalidate: () => undefined };

export function fixedToken(token: string): TokenSource {
  return { get: () => token, invalidate: () => undefined };
}

/** A token kept in a file the kubelet replaces before it expires (projected service account tokens). */
export function fileToken(path: string, now: () => number = Date.now, read: (p: string) => string = (p) => readFileSync(p, 'utf8')): TokenSource {
  let cached: { token: string; at: number } | undefined;
  return {
    get() {
      if (cached && now() - cached.at < TOKEN_REREAD_MS) return cached.token;
      try {
        cached = { token: read(path).trim(), at: now() };
      } catch (err) {
        // Keep serving the last token (it may still be valid); with none, the request goes unauthenticated and fails visibly.
        if (!cached) throw new Error(`cannot read the bearer token file ${path}: ${String(err)}`, { cause: err });
      }
      return cached.token;
    },
    invalidate() {
      cached = cached && { ...cached, at: -Infinity };
    },
  };
}

/** In a pod: the API server from the service env, the CA and the rotated token from the service account volume. */
export function inClusterAccess(
  env: NodeJS.ProcessEnv,
  dir = SERVICE_ACCOUNT_DIR,
  read: (p: string) => string = (p) => readFileSync(p, 'utf8'),
): ClusterAccess {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw new Error('not running in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset (pass --kubeconfig)');
  const tokenPath = join(dir, 'token');
  const token = fileToken(tokenPath, Date.now, read);
  token.get(); // fail now, with the path, rather than on the first request
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    ca: read(join(dir, 'ca.crt')),
    insecureSkipTLSVerify: false,
    token,
  };
}
