// make demo: the story so far, on the local cluster. Deploys the sample CSI driver (real upstream sidecars),
// shows who holds each leader-election Lease, rolls the controller Deployment out the way a log-level change
// or `kubectl rollout restart` would, and prints how long each sidecar had no leader.
// DEMO_TIMINGS=openshift uses OpenShift's 137s/107s/26s lease timings (minutes per rollout).
import { makeLogger } from '../src/log.js';
import { formatHandovers, measureRollout, type Overlay } from './bench/measure-rollout.js';
import { clusterHttp, kubeconfigPath } from './lib/cluster.js';

const log = makeLogger('demo', process.env.LOG_LEVEL ?? 'warn');
const timings = process.env.DEMO_TIMINGS === 'openshift' ? 'openshift' : 'upstream';
const overlay: Overlay = process.env.DEMO_REPLICAS === '1' ? `${timings}-1replica` : timings;

console.log(`Deploying the sample driver (${overlay}) and rolling it out without csi-handover…`);
const result = await measureRollout(clusterHttp(), overlay, log);
console.log(`\n${formatHandovers(result)}\n`);
const gaps = result.handovers.flatMap((h) => (h.gapMs === undefined ? [] : [h.gapMs]));
if (gaps.length) {
  console.log(`Each sidecar stopped provisioning/attaching/resizing/snapshotting for up to ${(Math.max(...gaps) / 1000).toFixed(1)}s:`);
  console.log('the old leader died holding its Lease and the new pod waited for it to expire.');
}
console.log(`\nThe cluster is still running: export KUBECONFIG=${kubeconfigPath}; stop it with make cluster-down.`);
