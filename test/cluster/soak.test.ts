// make soak, short: a few rollouts with faults drawn at random (SOAK_SEED repeats a draw) and the independent
// observer throughout; nothing may be violated or left behind. docs/reliability.md holds a long run's figures.
import { expect, it } from 'vitest';
import { formatSoak } from '../../hack/bench/soak-summary.js';
import { runSoak } from '../../hack/bench/soak.js';

it('a short soak: every rollout completes, no invariant violated, nothing left behind', async () => {
  const seed = Number(process.env.SOAK_SEED ?? Math.floor(Math.random() * 2 ** 31));
  const rollouts = Number(process.env.SOAK_ROLLOUTS ?? 8);
  const { summary } = await runSoak({ rollouts, seed, faultShare: 0.5, say: (l) => console.log(`soak: ${l}`) });
  console.log(`soak (SOAK_SEED=${seed}):\n${formatSoak(summary)}`);
  expect(summary.rollouts).toBe(rollouts);
  expect(summary.handovers, 'every rollout handed every lease over').toBeGreaterThanOrEqual(rollouts * 5);
  expect(summary.violations, `SOAK_SEED=${seed}`).toEqual([]);
  expect(summary.leftBehind, `SOAK_SEED=${seed}`).toEqual([]);
});
