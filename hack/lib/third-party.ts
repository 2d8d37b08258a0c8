// The released upstream sources and files kept beside the project (../shared/third_party; see its README), found
// as hack/bins.sh finds them: $CSI_HANDOVER_THIRD_PARTY, beside the repo, or beside the clone's origin.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { repoRoot } from './cluster.js';

export function thirdPartyDir(sub: string): string {
  const candidates = [process.env.CSI_HANDOVER_THIRD_PARTY, join(repoRoot, '..', 'shared', 'third_party')];
  try {
    const origin = execFileSync('git', ['-C', repoRoot, 'remote', 'get-url', 'origin'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (existsSync(origin)) candidates.push(join(resolve(repoRoot, origin), '..', 'shared', 'third_party'));
  } catch {
    // no origin: a checkout that is not a clone
  }
  for (const c of candidates) if (c && existsSync(join(c, sub))) return join(c, sub);
  throw new Error(`third_party/${sub} not found beside the repo or its origin (set CSI_HANDOVER_THIRD_PARTY)`);
}
