import { describe, expect, it } from 'vitest';
import { fileToken, inClusterAccess, TOKEN_REREAD_MS } from '../../src/kube/config.js';
import { kubeconfigAccess } from '../../src/kube/kubeconfig.js';

/** A file system of named contents; reading anything else fails as the real one would. */
const files = (entries: Record<string, string>) => (p: string) => {
  const v = entries[p];
  if (v === undefined) throw new Error(`ENOENT: ${p}`);
  return v;
};
const b64 = (s: string) => Buffer.from(s).toString('base64');

const kubeconfig = (user: string, extra = '') => `
apiVersion: v1
kind: Config
current-context: ctx
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: pki/ca.crt
${extra}
users:
- name: u
  user:
${user}
contexts:
- name: ctx
  context: {cluster: c, user: u}
`;

describe('kubeconfigAccess', () => {
  it('reads client certificate files relative to the kubeconfig, and the CA', () => {
    const read = files({
      '/k/config': kubeconfig('    client-certificate: pki/admin.crt\n    client-key: /abs/admin.key'),
      '/k/pki/ca.crt': 'CA',
      '/k/pki/admin.crt': 'CERT',
      '/abs/admin.key': 'KEY',
    });
    const a = kubeconfigAccess('/k/config', read);
    expect(a).toMatchObject({ server: 'https://10.0.0.1:6443', ca: 'CA', cert: 'CERT', key: 'KEY', insecureSkipTLSVerify: false });
    expect(a.token.get()).toBeUndefined();
  });

  it('reads inline data and an inline token', () => {
    const read = files({
      '/k/config': kubeconfig(
        `    client-certificate-data: ${b64('CERT')}\n    client-key-data: ${b64('KEY')}\n    token: abc`,
        '    insecure-skip-tls-verify: true\n    tls-server-name: api.local',
      ).replace('certificate-authority: pki/ca.crt', `certificate-authority-data: ${b64('CA')}`),
    });
    const a = kubeconfigAccess('/k/config', read);
    expect(a).toMatchObject({ ca: 'CA', cert: 'CERT', key: 'KEY', insecureSkipTLSVerify: true, serverName: 'api.local' });
    expect(a.token.get()).toBe('abc');
  });

  it('reads a token file', () => {
    const read = files({ '/k/config': kubeconfig('    tokenFile: tok'), '/k/pki/ca.crt': 'CA', '/k/tok': 'from-file\n' });
    expect(kubeconfigAccess('/k/config', read).token.get()).toBe('from-file');
  });

  it.each([
    ['an exec plugin', kubeconfig('    exec: {command: aws}'), /exec plugin.*client certificate or a token/],
    ['an auth provider', kubeconfig('    auth-provider: {name: gcp}'), /auth provider/],
    ['basic auth', kubeconfig('    username: admin'), /username/],
    ['a certificate without its key', kubeconfig('    client-certificate: pki/admin.crt'), /without its key/],
    [
      'no current context',
      kubeconfig('    token: x').replace('current-context: ctx', '').replace('- name: ctx', '- name: ctx\n  context: {cluster: c}\n- name: other'),
      /no current-context/,
    ],
    ['an undefined context', kubeconfig('    token: x').replace('current-context: ctx', 'current-context: nope'), /context "nope" is not defined/],
    ['a proxy', kubeconfig('    token: x', '    proxy-url: http://proxy:3128'), /proxy-url/],
    ['a server that is no URL', kubeconfig('    token: x').replace('https://10.0.0.1:6443/', 'not a url'), /clusters\.0\.cluster\.server/],
    ['not a kubeconfig at all', '- just\n- a list', /not a kubeconfig/],
  ])('refuses %s with a clear error', (_what, text, want) => {
    const read = files({ '/k/config': text, '/k/pki/ca.crt': 'CA', '/k/pki/admin.crt': 'CERT' });
    expect(() => kubeconfigAccess('/k/config', read)).toThrow(want);
  });

  it('names the file it cannot read', () => {
    expect(() => kubeconfigAccess('/k/config', files({ '/k/config': kubeconfig('    token: x') }))).toThrow(/pki\/ca.crt/);
  });
});

describe('fileToken', () => {
  it('re-reads the file after a minute, or at once after a 401, and keeps the last token if the file is briefly gone', () => {
    let now = 0;
    let content: string | undefined = 'one';
    let reads = 0;
    const t = fileToken(
      '/t',
      () => now,
      () => {
        reads++;
        if (content === undefined) throw new Error('ENOENT');
        return content;
      },
    );
    expect(t.get()).toBe('one');
    content = 'two';
    now = TOKEN_REREAD_MS - 1;
    expect(t.get()).toBe('one');
    now = TOKEN_REREAD_MS;
    expect(t.get()).toBe('two');
    content = 'three';
    t.invalidate();
    expect(t.get()).toBe('three');
    content = undefined; // the kubelet swaps the symlinked file
    t.invalidate();
    expect(t.get()).toBe('three');
    expect(reads).toBe(4);
  });

  it('fails with the path when there never was a token', () => {
    expect(() => fileToken('/nope', () => 0, files({})).get()).toThrow(/\/nope/);
  });
});

describe('inClusterAccess', () => {
  const sa = files({ '/sa/token': 'tok\n', '/sa/ca.crt': 'CA' });
  it('uses the service env, the CA and the token of the service account', () => {
    const a = inClusterAccess({ KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, '/sa', sa);
    expect(a).toMatchObject({ server: 'https://10.96.0.1:443', ca: 'CA', insecureSkipTLSVerify: false });
    expect(a.token.get()).toBe('tok');
  });
  it('brackets an IPv6 service address', () => {
    expect(inClusterAccess({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, '/sa', sa).server).toBe('https://[fd00::1]:443');
  });
  it('says what is missing outside a pod', () => {
    expect(() => inClusterAccess({}, '/sa', sa)).toThrow(/KUBERNETES_SERVICE_HOST.*--kubeconfig/);
    expect(() => inClusterAccess({ KUBERNETES_SERVICE_HOST: 'h', KUBERNETES_SERVICE_PORT: '1' }, '/none', sa)).toThrow(/\/none\/token/);
  });
});
