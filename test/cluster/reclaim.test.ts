// A local cluster killed outright (what a CI timeout or a closed session does: every process SIGKILLed, no
// `down`, its state directory deleted) leaves its bridge and cgroups on the host; the next `cluster up` on the
// same node network must reclaim them, and its own `down` must then leave the host as it was. Two throwaway
// clusters on their own ports and addresses, beside the shared one: about two minutes, so it runs in
// `make test-reliability`, not `make test` (whose real-nodes file proves an orderly `down` leaves the host clean).
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { binDir, SECOND_CLUSTER_ENV, repoRoot, waitFor } from '../../hack/lib/cluster.js';
import { clusterCgroupPrefix, hostState } from '../../hack/lib/host-state.js';

const run = promisify(execFile);
const env = {
  ...process.env,
  ...SECOND_CLUSTER_ENV,
  CSI_HANDOVER_KWOK_NODES: '0',
};
const script = join(repoRoot, 'hack', 'cluster.sh');
const nodesScript = join(repoRoot, 'hack', 'nodes.sh');

it('a run killed outright (every process SIGKILLed, its state dir deleted) is reclaimed by the next cluster up', async () => {
  const killed = mkdtempSync('/tmp/csi-handover-real-killed-');
  const next = mkdtempSync('/tmp/csi-handover-real-next-');
  const before = await hostState([killed, next]);
  try {
    await run(script, ['up'], { env: { ...env, CSI_HANDOVER_LOCAL: killed }, maxBuffer: 16 << 20 });
    const { stdout } = await run(nodesScript, ['processes'], { env: { ...env, CSI_HANDOVER_LOCAL: killed } });
    const { stdout: named } = await run('pgrep', ['-f', '--', `${killed}/`]);
    await run('kill', ['-KILL', ...new Set(`${stdout} ${named}`.split(/\s+/).filter(Boolean))]).catch(() => undefined);
    await waitFor(
      'the killed cluster gone',
      30_000,
      async () => (await run('pgrep', ['-f', '--', `${killed}/`]).catch(() => ({ stdout: '' }))).stdout.trim() === '',
    );
    rmSync(killed, { recursive: true, force: true });
    // Its bridge (with the nodes' address) and cgroups are still there: the next cluster on that network must start.
    const { stderr } = await run(script, ['up'], { env: { ...env, CSI_HANDOVER_LOCAL: next }, maxBuffer: 16 << 20 });
    expect(stderr).toContain(`reclaiming what a dead cluster left on this host: id ${clusterCgroupPrefix(killed).slice(-6)}`);
    const { stdout: nodes } = await run(join(binDir, 'kubectl'), ['get', 'nodes', '-o', 'name'], {
      env: { ...env, KUBECONFIG: join(next, 'kubeconfig') },
    });
    expect(nodes.split('\n').filter(Boolean)).toEqual(['node/node-1', 'node/node-2']);
    await run(script, ['down'], { env: { ...env, CSI_HANDOVER_LOCAL: next } });
    expect(await hostState([killed, next])).toEqual(before);
  } finally {
    await run(script, ['down'], { env: { ...env, CSI_HANDOVER_LOCAL: next } }).catch(() => undefined);
    rmSync(killed, { recursive: true, force: true });
    rmSync(next, { recursive: true, force: true });
  }
});
