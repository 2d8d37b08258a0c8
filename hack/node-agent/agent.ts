// The node agent: plays the kubelet for a few nodes on this machine. It registers the nodes and keeps
// their heartbeats, runs the pods bound to them as local processes (PodWorker) — or, for benchmarks, as
// pods without processes (VirtualPod) — reports pod status, and finishes graceful deletions by deleting the
// pod object, as the kubelet does.
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isConflict, isNotFound, KubeApiError, type KubeHttp, PatchType } from '../../src/kube/http.js';
import { Informer } from '../../src/kube/informer.js';
import type { ImageMap } from './container-spec.js';
import { podStatus, toWire } from './pod-status.js';
import { type AgentEvent, PodWorker } from './pod-worker.js';
import { isVirtualPod, VirtualPod } from './virtual-pod.js';

export interface AgentConfig {
  nodes: string[];
  binDir: string;
  stateDir: string;
  logDir: string;
  images: ImageMap;
  csiDrivers: string[];
  controlPort: number;
  /** First two octets of the pod IPs (`127.1` → 127.1.x.y), so two local clusters' pods never share an address. */
  podNetwork: string;
  /** Pods each node admits (status.allocatable.pods). */
  maxPods: number;
  leaseIntervalMs: number;
  restartBackoff: { baseMs: number; maxMs: number };
}

interface NodeState {
  name: string;
  partitioned: boolean;
  informer: Informer<V1Pod>;
  heartbeat?: NodeJS.Timeout;
  lastStatusAt: number;
}

const podKey = (p: V1Pod): string => `${p.metadata?.namespace}/${p.metadata?.name}`;

type PodRunner = PodWorker | VirtualPod;

export class NodeAgent {
  private readonly nodes = new Map<string, NodeState>();
  private readonly workers = new Map<string, PodRunner>();
  private readonly statusQueued = new Set<string>();
  private readonly statusChains = new Map<string, Promise<void>>();
  private readonly events: AgentEvent[] = [];
  private readonly eventsFile: string;
  private readonly caCert: string;
  private readonly apiHost: string;
  private readonly apiPort: string;
  private server: Server | undefined;
  private shuttingDown = false;
  private nextPodIP = 2;

  constructor(
    private readonly http: KubeHttp,
    private readonly cfg: AgentConfig,
    private readonly log: Logger,
  ) {
    mkdirSync(cfg.stateDir, { recursive: true });
    mkdirSync(cfg.logDir, { recursive: true });
    this.eventsFile = join(cfg.stateDir, 'events.jsonl');
    const cluster = http.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const server = new URL(cluster.server);
    this.apiHost = server.hostname;
    this.apiPort = server.port || '443';
    this.caCert = cluster.caFile ? readFileSync(cluster.caFile, 'utf8') : Buffer.from(cluster.caData ?? '', 'base64').toString('utf8');
  }

  async start(): Promise<void> {
    await this.serveControl();
    for (const name of this.cfg.nodes) {
      const informer = new Informer<V1Pod>(this.http, {
        path: '/api/v1/pods',
        fieldSelector: `spec.nodeName=${name}`,
        log: this.log.child({ node: name }),
      });
      const node: NodeState = { name, partitioned: false, informer, lastStatusAt: 0 };
      informer.on('add', (p) => this.syncPod(node, p));
      informer.on('update', (p) => this.syncPod(node, p));
      informer.on('delete', (p) => this.podGone(node, p));
      this.nodes.set(name, node);
      await this.registerNode(name);
      await this.registerCSINode(name);
      this.startHeartbeat(node);
      informer.start();
    }
    this.log.info({ nodes: this.cfg.nodes }, 'node agent running');
  }

  // ---- nodes ----

  private async registerNode(name: string): Promise<void> {
    const node: V1Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, labels: { 'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': 'amd64' } },
    };
    try {
      await this.http.request('POST', '/api/v1/nodes', { body: node });
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    await this.reportNodeStatus(name);
  }

  private async reportNodeStatus(name: string): Promise<void> {
    const now = new Date().toISOString();
    const cond = (type: string, status: string, reason: string, message: string) => ({
      type, status, reason, message, lastHeartbeatTime: now, lastTransitionTime: now,
    });
    const existing = await this.http.get<V1Node>(`/api/v1/nodes/${name}`);
    const keepTransition = (c: { type: string; status: string; lastTransitionTime: string }) => {
      const prev = existing.status?.conditions?.find((p) => p.type === c.type);
      return prev && prev.status === c.status && prev.lastTransitionTime ? { ...c, lastTransitionTime: prev.lastTransitionTime } : c;
    };
    const resources = { cpu: '8', memory: '32Gi', pods: String(this.cfg.maxPods), 'ephemeral-storage': '100Gi' };
    await this.http.patch(`/api/v1/nodes/${name}/status`, {
      status: {
        capacity: resources,
        allocatable: resources,
        conditions: [
          cond('Ready', 'True', 'KubeletReady', 'csi-handover node agent is posting ready status'),
          cond('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'node agent'),
          cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'node agent'),
          cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'node agent'),
        ].map(keepTransition),
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: name }],
        nodeInfo: {
          machineID: name, systemUUID: name, bootID: name, kernelVersion: 'local', osImage: 'csi-handover node agent',
          containerRuntimeVersion: 'process://local', kubeletVersion: 'v1.36.3', kubeProxyVersion: '', operatingSystem: 'linux', architecture: 'amd64',
        },
        daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
      },
    }, PatchType.strategic);
  }

  private async registerCSINode(name: string): Promise<void> {
    if (this.cfg.csiDrivers.length === 0) return;
    const body = {
      apiVersion: 'storage.k8s.io/v1',
      kind: 'CSINode',
      metadata: { name },
      spec: { drivers: this.cfg.csiDrivers.map((d) => ({ name: d, nodeID: name, topologyKeys: null })) },
    };
    try {
      await this.http.request('POST', '/apis/storage.k8s.io/v1/csinodes', { body });
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }

  private startHeartbeat(node: NodeState): void {
    const beat = async (): Promise<void> => {
      if (node.partitioned || this.shuttingDown) return;
      try {
        await this.renewNodeLease(node.name);
        const n = await this.http.get<V1Node>(`/api/v1/nodes/${node.name}`);
        const ready = n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
        if (!ready || Date.now() - node.lastStatusAt > 60_000) {
          await this.reportNodeStatus(node.name);
          node.lastStatusAt = Date.now();
        }
      } catch (err) {
        this.log.warn({ node: node.name, err: String(err) }, 'heartbeat failed');
      }
    };
    void beat();
    node.heartbeat = setInterval(() => void beat(), this.cfg.leaseIntervalMs);
  }

  private async renewNodeLease(name: string): Promise<void> {
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${name}`;
    const spec = { holderIdentity: name, leaseDurationSeconds: 40, renewTime: new Date().toISOString().replace('Z', '000Z') };
    try {
      await this.http.patch(path, { spec }, PatchType.merge);
    } catch (err) {
      if (!isNotFound(err)) throw err;
      await this.http.request('POST', '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace: 'kube-node-lease' }, spec },
      });
    }
  }

  /** A partitioned node stops heartbeating and stops talking to the API; its processes keep running. */
  setPartitioned(name: string, partitioned: boolean): void {
    const node = this.nodes.get(name);
    if (!node) throw new Error(`no node ${name}`);
    if (node.partitioned === partitioned) return;
    node.partitioned = partitioned;
    this.record({ t: new Date().toISOString(), node: name, namespace: '', pod: '', uid: '', event: 'signal', detail: partitioned ? 'partitioned' : 'reconnected' });
    if (partitioned) {
      node.informer.stop();
    } else {
      node.lastStatusAt = 0;
      node.informer.start();
      for (const w of this.workers.values()) if (w.pod.spec?.nodeName === name) this.queueStatus(w);
    }
  }

  // ---- pods ----

  private syncPod(node: NodeState, pod: V1Pod): void {
    if (node.partitioned || this.shuttingDown) return;
    const uid = pod.metadata?.uid ?? '';
    let worker = this.workers.get(uid);
    if (worker) worker.pod = pod;
    const log = this.log.child({ node: node.name, pod: podKey(pod) });
    if (pod.metadata?.deletionTimestamp) {
      const grace = pod.metadata.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
      if (!worker) {
        void this.deletePodObject(pod, log);
        return;
      }
      const w = worker;
      log.info({ grace }, 'pod deleted: stopping containers');
      void w
        .stop(grace, 'pod deleted')
        .then(() => this.pushStatus(w))
        .then(() => this.deletePodObject(pod, log))
        .finally(() => {
          w.cleanup();
          this.workers.delete(uid);
        });
      return;
    }
    if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return;
    if (!worker && isVirtualPod(pod)) {
      const virtual = new VirtualPod(pod, {
        node: node.name, hostIP: '127.0.0.1', podIP: this.podIPFor(pod), record: (e) => this.record(e), changed: () => this.queueStatus(virtual),
      });
      this.workers.set(uid, virtual);
      void virtual.start();
      return;
    }
    if (!worker) {
      worker = new PodWorker(pod, {
        node: node.name,
        binDir: this.cfg.binDir,
        images: this.cfg.images,
        podDir: join(this.cfg.stateDir, 'pods'),
        stateDir: this.cfg.stateDir,
        logDir: this.cfg.logDir,
        facts: { hostIP: '127.0.0.1', podIP: this.podIPFor(pod), kubernetesServiceHost: this.apiHost, kubernetesServicePort: this.apiPort },
        restartBackoff: this.cfg.restartBackoff,
        log,
        requestToken: (p, audience, exp) => this.requestToken(p, audience, exp),
        readConfigMap: (ns, name) => this.readData(`/api/v1/namespaces/${ns}/configmaps/${name}`, false),
        readSecret: (ns, name) => this.readData(`/api/v1/namespaces/${ns}/secrets/${name}`, true),
        caCert: this.caCert,
        record: (e) => this.record(e),
        changed: () => this.queueStatus(workerRef),
      });
      const workerRef = worker;
      this.workers.set(uid, worker);
      log.info('starting pod');
      this.queueStatus(worker);
      void worker.start();
    }
  }

  /**
   * Pods share the host's network namespace, but each non-hostNetwork pod gets its own loopback address
   * (127.1.x.y by default) to bind to, so two replicas of a pod can listen on the same port, as with real pod IPs.
   */
  private podIPFor(pod: V1Pod): string {
    if (pod.spec?.hostNetwork) return '127.0.0.1';
    // A pod restarted after an agent restart keeps its address: the API refuses a second IP of the same
    // family in status.podIPs, and the status (terminations included) would never be written again.
    const prefix = `${this.cfg.podNetwork}.`;
    const had = pod.status?.podIP;
    if (had?.startsWith(prefix)) {
      const [x, y] = had.slice(prefix.length).split('.').map(Number);
      if (x !== undefined && y !== undefined) this.nextPodIP = Math.max(this.nextPodIP, x * 250 + (y - 2) + 1);
      return had;
    }
    const n = this.nextPodIP++;
    return `${this.cfg.podNetwork}.${Math.floor(n / 250) % 250}.${(n % 250) + 2}`;
  }

  /** The pod object is gone (force deletion, or removed while we were partitioned): stop what still runs. */
  private podGone(node: NodeState, pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? '';
    const worker = this.workers.get(uid);
    if (!worker || worker.isStopped()) return;
    const grace = pod.spec?.terminationGracePeriodSeconds ?? 30;
    this.log.warn({ node: node.name, pod: podKey(pod), grace }, 'pod object removed while its containers run: stopping them');
    void worker.stop(grace, 'pod object removed').finally(() => {
      worker.cleanup();
      this.workers.delete(uid);
    });
  }

  private async deletePodObject(pod: V1Pod, log: Logger): Promise<void> {
    const node = this.nodes.get(pod.spec?.nodeName ?? '');
    if (!node || node.partitioned) return;
    try {
      await this.http.request('DELETE', `/api/v1/namespaces/${pod.metadata?.namespace}/pods/${pod.metadata?.name}`, {
        body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata?.uid } },
      });
      log.info('pod object deleted');
    } catch (err) {
      if (!isNotFound(err) && !isConflict(err)) log.warn({ err: String(err) }, 'deleting pod object failed');
    }
  }

  private queueStatus(worker: PodRunner): void {
    if (this.statusQueued.has(worker.uid)) return;
    this.statusQueued.add(worker.uid);
    setImmediate(() => {
      this.statusQueued.delete(worker.uid);
      void this.pushStatus(worker);
    });
  }

  /**
   * Status writes of one pod are serialised, each computed when it is sent, as the kubelet's status manager
   * does: concurrent patches could land out of order and regress a terminated container to running.
   */
  private pushStatus(worker: PodRunner): Promise<void> {
    const previous = this.statusChains.get(worker.uid) ?? Promise.resolve();
    const next = previous.then(() => this.sendStatus(worker));
    this.statusChains.set(worker.uid, next);
    void next.finally(() => {
      if (this.statusChains.get(worker.uid) === next) this.statusChains.delete(worker.uid);
    });
    return next;
  }

  private async sendStatus(worker: PodRunner): Promise<void> {
    const pod = worker.pod;
    const node = this.nodes.get(pod.spec?.nodeName ?? '');
    if (!node || node.partitioned || this.shuttingDown) return;
    const status = podStatus(pod, worker.view(), new Date(), pod.status);
    try {
      await this.http.patch(`/api/v1/namespaces/${pod.metadata?.namespace}/pods/${pod.metadata?.name}/status`, {
        metadata: { uid: pod.metadata?.uid },
        status: toWire(status),
      }, PatchType.strategic);
    } catch (err) {
      if (!isNotFound(err)) this.log.warn({ pod: podKey(pod), err: String(err) }, 'status update failed');
    }
  }

  private async requestToken(pod: V1Pod, audience: string | undefined, expirationSeconds: number): Promise<string> {
    const ns = pod.metadata?.namespace ?? 'default';
    const sa = pod.spec?.serviceAccountName ?? 'default';
    const res = await this.http.request<{ status: { token: string } }>('POST', `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          audiences: audience ? [audience] : null,
          expirationSeconds: Math.max(expirationSeconds, 600),
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name, uid: pod.metadata?.uid },
        },
      },
    });
    return res.status.token;
  }

  private async readData(path: string, base64: boolean): Promise<Record<string, string> | undefined> {
    try {
      const obj = await this.http.get<{ data?: Record<string, string> }>(path);
      const data = obj.data ?? {};
      return base64 ? Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])) : data;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 404) return undefined;
      throw err;
    }
  }

  // ---- events and control ----

  private record(e: AgentEvent): void {
    this.events.push(e);
    appendFileSync(this.eventsFile, `${JSON.stringify(e)}\n`);
  }

  private serveControl(): Promise<void> {
    this.server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const reply = (code: number, body: unknown) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      try {
        if (url.pathname === '/healthz') return reply(200, { ok: true });
        if (url.pathname === '/events') return reply(200, this.events);
        if (url.pathname === '/pods') {
          return reply(200, [...this.workers.values()].map((w) => ({
            namespace: w.pod.metadata?.namespace, pod: w.pod.metadata?.name, uid: w.uid, node: w.pod.spec?.nodeName,
            stopped: w.isStopped(), containers: w.view().containers,
          })));
        }
        if (url.pathname === '/partition' && req.method === 'POST') {
          const name = url.searchParams.get('node') ?? '';
          this.setPartitioned(name, url.searchParams.get('value') !== 'false');
          return reply(200, { node: name, partitioned: this.nodes.get(name)?.partitioned });
        }
        reply(404, { error: `no route ${req.method} ${url.pathname}` });
      } catch (err) {
        reply(400, { error: String(err) });
      }
    });
    return new Promise((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(this.cfg.controlPort, '127.0.0.1', () => resolve());
    });
  }

  /** Stops every pod's processes (SIGTERM, then SIGKILL after a short grace) without touching the API. */
  async shutdown(graceSeconds: number): Promise<void> {
    this.shuttingDown = true;
    for (const n of this.nodes.values()) {
      clearInterval(n.heartbeat);
      n.informer.stop();
    }
    await Promise.all([...this.workers.values()].map((w) => w.stop(graceSeconds, 'node agent shutting down')));
    this.server?.close();
  }
}
