import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  it('uses defaults, then environment, then flags', () => {
    const c = loadConfig(['--retry-period=500ms'], { POD_NAMESPACE: 'ops', POD_NAME: 'op-1', CSI_HANDOVER_MODE: 'companion', WATCH_NAMESPACES: 'a, b' });
    expect(c).toMatchObject({
      mode: 'companion',
      namespaces: ['a', 'b'],
      leaderElection: true,
      leaderElectionNamespace: 'ops',
      identity: 'op-1',
      leaseDuration: 15_000,
      renewDeadline: 10_000,
      retryPeriod: 500,
      httpPort: 8080,
      bindAddress: '0.0.0.0',
    });
    expect(loadConfig(['--mode', 'standalone'], { CSI_HANDOVER_MODE: 'companion' }).mode).toBe('standalone');
    // The sidecars' own retry period; early starts only when asked for.
    expect(loadConfig([], {})).toMatchObject({ retryPeriod: 5_000, earlyStart: false });
    expect(loadConfig([], { EARLY_START: 'true' }).earlyStart).toBe(true);
  });
  it.each([
    [['--mode=both'], /mode/],
    [['--lease-duration=fifteen'], /leaseDuration: a duration/],
    [['--renew-deadline=20s'], /renew deadline must be shorter than the lease duration/],
    [['--retry-period=10s'], /retry period must be shorter than the renew deadline/],
    [['--http-port=0'], /httpPort/],
    [['--early-start=yes'], /earlyStart/],
    [['--no-such-flag=1'], /no-such-flag/],
  ])('rejects %j with a readable error', (argv, message) => {
    expect(() => loadConfig(argv, {})).toThrow(message);
  });
});
