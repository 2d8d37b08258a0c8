// The shipped alert rules against the real operator: a real Prometheus scrapes both replicas' /metrics (the pods
// the test lists: Debian's Prometheus has no Kubernetes discovery) and evaluates config/prometheus. A handover the operator released raises nothing; a
// force-deleted leader (the operator refuses to release; the leases expire) raises the expiry and refusal alerts.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterHttp, repoRoot, SAMPLE_LEASES, SAMPLE_NAMESPACE as NS, waitFor } from '../../hack/lib/cluster.js';
import { LEVELS, operatorMetric, operatorPods, setSampleCrLevel, settledSampleLeader, standaloneSampleAt } from '../../hack/lib/operator.js';
import { type ActiveAlert, LocalPrometheus } from '../../hack/lib/prometheus.js';
import { ruleGroupsOf } from '../tools/prometheus.js';

const http = clusterHttp();
const leases = Object.values(SAMPLE_LEASES);
let prometheus: LocalPrometheus;

const firing = async (): Promise<ActiveAlert[]> => (await prometheus.alerts()).filter((a) => a.state === 'firing');
const names = (alerts: ActiveAlert[]) => alerts.map((a) => (a.labels.reason ? `${a.labels.alertname}{reason=${a.labels.reason}}` : a.labels.alertname)).sort();

/** Waits until Prometheus has scraped the leader's counter at `value` or more (so the rules have seen it). */
async function scraped(series: string, value: number): Promise<void> {
  await waitFor(`Prometheus to scrape ${series} >= ${value}`, 30_000, async () => ((await prometheus.query(`sum(${series})`))[0]?.value ?? -1) >= value, 250);
}

beforeAll(async () => {
  await standaloneSampleAt(http, LEVELS[4] ?? 'Debug');
  prometheus = await LocalPrometheus.start(ruleGroupsOf(readFileSync(join(repoRoot, 'config', 'prometheus', 'prometheus_rule.yaml'), 'utf8')));
  prometheus.setTargets((await operatorPods(http)).map((p) => ({ address: `${p.status?.podIP}:8080`, pod: p.metadata?.name ?? '' })));
});

afterAll(async () => {
  await prometheus?.stop();
});

describe('alert rules on a real Prometheus', () => {
  it('scrapes both operator replicas and sees one leader', async () => {
    await waitFor(
      'both replicas scraped, one leading',
      60_000,
      async () => {
        const up = await prometheus.query('up{job="csi-handover"} == 1');
        const leader = await prometheus.query('sum(csi_handover_leader)');
        return up.length === 2 && leader[0]?.value === 1;
      },
      500,
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\nprometheus said:\n${prometheus.log()}`);
    });
  });

  it('a handover the operator released raises nothing; a force-deleted leader raises the expiry and refusal alerts', async () => {
    // A log-level change: the operator releases every lease of the old pod.
    const releasedBefore = await operatorMetric(http, 'csi_handover_lease_releases_total{released_by="operator"}');
    await setSampleCrLevel(http, LEVELS[2] ?? 'Normal');
    const leader = await waitFor(
      'the rollout to a new pod',
      300_000,
      async () => {
        const pod = await settledSampleLeader(http);
        return (await operatorMetric(http, 'csi_handover_lease_releases_total{released_by="operator"}')) >= releasedBefore + leases.length && pod;
      },
      1_000,
    );
    await scraped('csi_handover_lease_releases_total{released_by="operator"}', releasedBefore + leases.length);
    // Evaluated after that scrape (every second): nothing fires.
    const evaluatedAfter = Date.now() + 3_000;
    await waitFor('three more rule evaluations', 10_000, () => Date.now() >= evaluatedAfter, 250);
    expect(names(await firing())).toEqual([]);

    // The leader force-deleted: not proven dead, so the operator refuses to release; its leases expire.
    const expiredBefore = await operatorMetric(http, 'csi_handover_lease_releases_total{released_by="expiry"}');
    await http.request('DELETE', `/api/v1/namespaces/${NS}/pods/${leader.metadata?.name ?? ''}`, { body: { gracePeriodSeconds: 0 } });
    await waitFor(
      'the leases handed over by expiry',
      120_000,
      async () => (await operatorMetric(http, 'csi_handover_lease_releases_total{released_by="expiry"}')) >= expiredBefore + leases.length,
      1_000,
    );
    const alerts = await waitFor(
      'the expiry and refusal alerts',
      30_000,
      async () => {
        const now = names(await firing());
        return now.includes('CSIHandoverFellBackToExpiry') && now.includes('CSIHandoverReleaseRefused{reason=force-deleted}') && now;
      },
      500,
    ).catch(async (err: unknown) => {
      throw new Error(`${String(err)}; firing: ${names(await firing()).join(', ')}\nprometheus said:\n${prometheus.log()}`);
    });
    // Nothing else: the operator still leads, no gate timed out (the old pod's leases expired within the gate timeout).
    expect(alerts).toEqual(['CSIHandoverFellBackToExpiry', 'CSIHandoverReleaseRefused{reason=force-deleted}']);
    const expiry = (await firing()).find((a) => a.labels.alertname === 'CSIHandoverFellBackToExpiry');
    expect(expiry?.labels.severity).toBe('warning');
    expect(expiry?.annotations.description).toContain('kubectl csi-handover status');
  });
});
