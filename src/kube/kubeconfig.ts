// A kubeconfig file's current context → ClusterAccess (src/kube/config.ts): for running the operator, the tests
// and the benchmarks outside a pod.
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { type ClusterAccess, fileToken, fixedToken, noToken } from './config.js';
import { describeIssues } from '../issues.js';

const KubeconfigFile = z.object({
  'current-context': z.string().optional(),
  clusters: z
    .array(
      z.object({
        name: z.string(),
        cluster: z.object({
          server: z.string().url(),
          'certificate-authority': z.string().optional(),
          'certificate-authority-data': z.string().optional(),
          'insecure-skip-tls-verify': z.boolean().optional(),
          'tls-server-name': z.string().optional(),
          'proxy-url': z.string().optional(),
        }),
      }),
    )
    .default([]),
  users: z
    .array(
      z.object({
        name: z.string(),
        user: z
          .object({
            'client-certificate': z.string().optional(),
            'client-certificate-data': z.string().optional(),
            'client-key': z.string().optional(),
            'client-key-data': z.string().optional(),
            token: z.string().optional(),
            tokenFile: z.string().optional(),
            username: z.string().optional(),
            exec: z.unknown().optional(),
            'auth-provider': z.unknown().optional(),
          })
          .nullish(),
      }),
    )
    .default([]),
  contexts: z.array(z.object({ name: z.string(), context: z.object({ cluster: z.string(), user: z.string().optional() }) })).default([]),
});

/** The current context of a kubeconfig file (a single file; KUBECONFIG lists are not merged). */
export function kubeconfigAccess(path: string, read: (p: string) => string = (p) => readFileSync(p, 'utf8')): ClusterAccess {
  const fail = (why: string): never => {
    throw new Error(`kubeconfig ${path}: ${why}`);
  };
  const parsed = KubeconfigFile.safeParse(parse(read(path)));
  if (!parsed.success) fail(`not a kubeconfig this operator reads: ${describeIssues(parsed.error)}`);
  const kc = parsed.data!;
  const contextName = kc['current-context'] ?? (kc.contexts.length === 1 ? kc.contexts[0]?.name : undefined) ?? fail('no current-context');
  const context = kc.contexts.find((c) => c.name === contextName)?.context ?? fail(`context "${contextName}" is not defined`);
  const cluster = kc.clusters.find((c) => c.name === context.cluster)?.cluster ?? fail(`cluster "${context.cluster}" is not defined`);
  const user = context.user === undefined ? {} : ((kc.users.find((u) => u.name === context.user) ?? fail(`user "${context.user}" is not defined`)).user ?? {});
  if (user.exec !== undefined || user['auth-provider'] !== undefined || user.username !== undefined) {
    fail(
      `user "${context.user}" authenticates with ${user.exec !== undefined ? 'an exec plugin' : user['auth-provider'] !== undefined ? 'an auth provider' : 'a username'}, which this operator does not support: use a client certificate or a token`,
    );
  }
  if (cluster['proxy-url']) fail(`cluster "${context.cluster}" goes through proxy-url, which this operator does not support`);
  const base = dirname(path);
  const file = (p: string) => read(isAbsolute(p) ? p : join(base, p));
  const pem = (data: string | undefined, filePath: string | undefined) =>
    data !== undefined ? Buffer.from(data, 'base64').toString('utf8') : filePath !== undefined ? file(filePath) : undefined;
  const cert = pem(user['client-certificate-data'], user['client-certificate']);
  const key = pem(user['client-key-data'], user['client-key']);
  if ((cert === undefined) !== (key === undefined)) fail(`user "${context.user}" has a client certificate without its key, or a key without its certificate`);
  const tokenFile = user.tokenFile && (isAbsolute(user.tokenFile) ? user.tokenFile : join(base, user.tokenFile));
  return {
    server: cluster.server.replace(/\/+$/, ''),
    ca: pem(cluster['certificate-authority-data'], cluster['certificate-authority']),
    cert,
    key,
    serverName: cluster['tls-server-name'],
    insecureSkipTLSVerify: cluster['insecure-skip-tls-verify'] ?? false,
    token: user.token !== undefined ? fixedToken(user.token) : tokenFile ? fileToken(tokenFile, Date.now, read) : noToken,
  };
}
