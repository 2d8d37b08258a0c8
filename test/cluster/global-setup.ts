// Brings up the real local cluster once for all cluster tests: a fresh one (wiped state) unless one is
// already running, in which case it is reused and left running. KEEP_CLUSTER=1 keeps a fresh one up too.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { localDir, repoRoot } from '../../hack/lib/cluster.js';

function running(): boolean {
  const pidFile = join(localDir, 'pids', 'kube-apiserver');
  if (!existsSync(pidFile)) return false;
  try {
    process.kill(Number(readFileSync(pidFile, 'utf8').trim()), 0);
    return true;
  } catch {
    return false;
  }
}

export default function setup(): () => void {
  const script = join(repoRoot, 'hack', 'cluster.sh');
  const reuse = running();
  if (!reuse) {
    execFileSync(script, ['wipe'], { stdio: 'inherit' });
    try {
      execFileSync(script, ['up'], { stdio: 'inherit' });
    } catch (err) {
      // Vitest runs no teardown after a failed setup: a half-started cluster would hold the host's addresses.
      execFileSync(script, ['down'], { stdio: 'inherit' });
      throw err;
    }
  }
  return () => {
    if (!reuse && !process.env.KEEP_CLUSTER) execFileSync(script, ['down'], { stdio: 'inherit' });
  };
}
