// One pod on one node: its sandbox, volumes and container processes, restarts with backoff, readiness
// probes, and termination with SIGTERM → grace period → SIGKILL.
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import type { V1Container, V1Pod, V1Volume } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { binaryFor, containerArgv, containerEnv, fieldValue, type ImageMap, type PodFacts } from './container-spec.js';
import type { ContainerState, ContainerView, PodView } from './pod-status.js';
import { launchContainer, type Mount, type Sandbox, startSandbox } from './sandbox.js';
import type { NodeEvent } from '../lib/node-events.js';

/** The node agent records the same events a real node's record holds (hack/lib/node-events.ts). */
export type AgentEvent = NodeEvent;

export interface WorkerDeps {
  node: string;
  binDir: string;
  images: ImageMap;
  podDir: string;
  stateDir: string;
  logDir: string;
  facts: Omit<PodFacts, 'hostname'>;
  restartBackoff: { baseMs: number; maxMs: number };
  log: Logger;
  /** Writes the projected service-account token for the pod; returns the token. */
  requestToken(pod: V1Pod, audience: string | undefined, expirationSeconds: number): Promise<string>;
  readConfigMap(namespace: string, name: string): Promise<Record<string, string> | undefined>;
  readSecret(namespace: string, name: string): Promise<Record<string, string> | undefined>;
  caCert: string;
  record(e: AgentEvent): void;
  changed(): void;
}

interface Running {
  spec: V1Container;
  view: ContainerView;
  child?: ChildProcess;
  restartTimer?: NodeJS.Timeout;
  probeTimer?: NodeJS.Timeout;
  exited?: Promise<void>;
  backoffMs: number;
}

export class PodWorker {
  private sandbox: Sandbox | undefined;
  private readonly init: Running[];
  private readonly containers: Running[];
  private readonly startTime = new Date();
  private stopping = false;
  private stopped = false;
  private tokenTimer: NodeJS.Timeout | undefined;
  readonly dir: string;

  constructor(
    public pod: V1Pod,
    private readonly deps: WorkerDeps,
  ) {
    const view = (c: V1Container): Running => ({
      spec: c,
      view: { name: c.name, image: c.image ?? '', state: { kind: 'waiting', reason: 'ContainerCreating' }, restartCount: 0 },
      backoffMs: deps.restartBackoff.baseMs,
    });
    this.init = (pod.spec?.initContainers ?? []).map(view);
    this.containers = (pod.spec?.containers ?? []).map(view);
    this.dir = join(deps.podDir, pod.metadata?.uid ?? 'unknown');
  }

  get uid(): string {
    return this.pod.metadata?.uid ?? '';
  }

  get hostname(): string {
    return this.pod.spec?.hostNetwork ? this.deps.node : (this.pod.metadata?.name ?? '');
  }

  view(): PodView {
    return {
      init: this.init.map((r) => r.view),
      containers: this.containers.map((r) => r.view),
      startTime: this.startTime,
      hostIP: this.deps.facts.hostIP,
      podIP: this.deps.facts.podIP,
    };
  }

  isStopped(): boolean {
    return this.stopped;
  }

  private event(e: Omit<AgentEvent, 't' | 'node' | 'namespace' | 'pod' | 'uid'>): void {
    this.deps.record({
      t: new Date().toISOString(),
      node: this.deps.node,
      namespace: this.pod.metadata?.namespace ?? '',
      pod: this.pod.metadata?.name ?? '',
      uid: this.uid,
      ...e,
    });
  }

  private setState(r: Running, state: ContainerState): void {
    r.view.state = state;
    this.deps.changed();
  }

  async start(): Promise<void> {
    const log = this.deps.log;
    try {
      mkdirSync(this.dir, { recursive: true });
      await this.prepareVolumes();
      this.sandbox = await startSandbox(this.hostname, { PATH: process.env.PATH ?? '/usr/bin:/bin', CSI_HANDOVER_STATE: this.deps.stateDir });
      this.event({ event: 'pod-started', pid: this.sandbox.pid, detail: `hostname ${this.hostname}` });
    } catch (err) {
      log.error({ err: String(err) }, 'pod setup failed');
      for (const r of [...this.init, ...this.containers]) this.setState(r, { kind: 'waiting', reason: 'CreateContainerError', message: String(err) });
      return;
    }
    for (const r of this.init) {
      if (this.stopping) return;
      const ok = await this.runToCompletion(r);
      if (!ok) return;
    }
    for (const r of this.containers) this.startContainer(r);
  }

  /** Runs an init container until it exits 0, restarting it with backoff unless restartPolicy is Never. */
  private async runToCompletion(r: Running): Promise<boolean> {
    for (;;) {
      if (this.stopping) return false;
      this.startContainer(r, false);
      await r.exited;
      const s = r.view.state;
      if (s.kind === 'terminated' && s.exitCode === 0) return true;
      if (this.stopping || this.pod.spec?.restartPolicy === 'Never' || s.kind === 'waiting') return false;
      await new Promise((res) => setTimeout(res, r.backoffMs));
      r.backoffMs = Math.min(r.backoffMs * 2, this.deps.restartBackoff.maxMs);
      r.view.restartCount++;
    }
  }

  private startContainer(r: Running, restartOnExit = true): void {
    if (this.stopping || !this.sandbox) return;
    const binaryName = binaryFor(r.spec.image, this.deps.images);
    if (!binaryName) {
      this.setState(r, {
        kind: 'waiting',
        reason: 'ImageNotMapped',
        message: `the node agent has no binary for image ${r.spec.image ?? '(none)'}; add it to hack/node-agent/images.json`,
      });
      r.exited = Promise.resolve();
      return;
    }
    let env: Map<string, string>;
    let mounts: Mount[];
    try {
      env = containerEnv(this.pod, r.spec, { ...this.deps.facts, hostname: this.hostname });
      // Marks every process of ours, so `hack/cluster.sh down` can prove none is left behind.
      env.set('CSI_HANDOVER_STATE', this.deps.stateDir);
      mounts = this.mountsFor(r.spec);
    } catch (err) {
      this.setState(r, { kind: 'waiting', reason: 'CreateContainerConfigError', message: String(err) });
      r.exited = Promise.resolve();
      return;
    }
    const logFile = join(this.deps.logDir, `${this.pod.metadata?.namespace}_${this.pod.metadata?.name}_${r.spec.name}.log`);
    const child = launchContainer({
      sandboxPid: this.sandbox.pid,
      binary: isAbsolute(binaryName) ? binaryName : join(this.deps.binDir, binaryName),
      argv: containerArgv(r.spec, env),
      env,
      mounts,
      logFile,
    });
    r.child = child;
    const startedAt = new Date();
    const pid = child.pid ?? -1;
    r.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        r.child = undefined;
        clearInterval(r.probeTimer);
        const finishedAt = new Date();
        const exitCode = code ?? 128 + (signal === 'SIGKILL' ? 9 : signal === 'SIGTERM' ? 15 : 0);
        const terminated: Extract<ContainerState, { kind: 'terminated' }> = {
          kind: 'terminated',
          exitCode,
          signal: signal ?? undefined,
          startedAt,
          finishedAt,
          reason: exitCode === 0 ? 'Completed' : 'Error',
        };
        this.event({ event: 'container-exited', container: r.spec.name, pid, exitCode: code, signal });
        // Ten minutes of running resets the restart backoff, as in the kubelet.
        if (finishedAt.getTime() - startedAt.getTime() > 600_000) r.backoffMs = this.deps.restartBackoff.baseMs;
        this.setState(r, terminated);
        if (restartOnExit && !this.stopping) this.scheduleRestart(r, terminated);
        resolve();
      });
    });
    this.event({ event: 'container-started', container: r.spec.name, pid });
    r.view.probeReady = r.spec.readinessProbe ? false : undefined;
    this.setState(r, { kind: 'running', startedAt, pid });
    this.startReadinessProbe(r);
  }

  private scheduleRestart(r: Running, last: Extract<ContainerState, { kind: 'terminated' }>): void {
    const policy = this.pod.spec?.restartPolicy ?? 'Always';
    if (policy === 'Never' || (policy === 'OnFailure' && last.exitCode === 0)) return;
    r.view.lastTerminated = last;
    const delay = r.backoffMs;
    r.backoffMs = Math.min(r.backoffMs * 2, this.deps.restartBackoff.maxMs);
    this.setState(r, { kind: 'waiting', reason: 'CrashLoopBackOff', message: `back-off ${Math.round(delay / 1000)}s restarting failed container` });
    r.restartTimer = setTimeout(() => {
      r.view.restartCount++;
      this.startContainer(r);
    }, delay);
  }

  private startReadinessProbe(r: Running): void {
    const probe = r.spec.readinessProbe;
    const http = probe?.httpGet;
    if (!probe || !http) return;
    const period = (probe.periodSeconds ?? 10) * 1000;
    const check = async (): Promise<void> => {
      // A probe may name its port; it refers to one of the container's ports.
      const port = typeof http.port === 'number' || /^\d+$/.test(http.port)
        ? Number(http.port)
        : r.spec.ports?.find((p) => p.name === http.port)?.containerPort;
      let ready = false;
      try {
        const res = await fetch(`http://${http.host ?? this.deps.facts.podIP}:${port}${http.path ?? '/'}`, { signal: AbortSignal.timeout((probe.timeoutSeconds ?? 1) * 1000) });
        ready = res.status >= 200 && res.status < 400;
      } catch {
        ready = false;
      }
      if (r.view.state.kind === 'running' && r.view.probeReady !== ready) {
        r.view.probeReady = ready;
        this.deps.changed();
      }
    };
    setTimeout(() => void check(), (probe.initialDelaySeconds ?? 0) * 1000);
    r.probeTimer = setInterval(() => void check(), period);
  }

  private mountsFor(c: V1Container): Mount[] {
    return (c.volumeMounts ?? []).map((m) => {
      const vol = (this.pod.spec?.volumes ?? []).find((v) => v.name === m.name);
      if (!vol) throw new Error(`volumeMount ${m.name}: no such volume`);
      return { source: join(this.dir, 'volumes', m.name, m.subPath ?? ''), target: m.mountPath, readOnly: m.readOnly ?? false };
    });
  }

  // ---- volumes ----

  private async prepareVolumes(): Promise<void> {
    for (const v of this.pod.spec?.volumes ?? []) {
      const dir = join(this.dir, 'volumes', v.name);
      mkdirSync(dir, { recursive: true });
      await this.fillVolume(v, dir);
    }
    // Bound tokens expire: refresh projected ones well before, as the kubelet does at 80% of their life.
    const hasToken = (this.pod.spec?.volumes ?? []).some((v) => v.projected?.sources?.some((s) => s.serviceAccountToken));
    if (hasToken) {
      this.tokenTimer = setInterval(() => {
        void this.prepareVolumes().catch((err: unknown) => this.deps.log.warn({ err: String(err) }, 'token refresh failed'));
      }, 20 * 60_000);
      this.tokenTimer.unref();
    }
  }

  private async fillVolume(v: V1Volume, dir: string): Promise<void> {
    const ns = this.pod.metadata?.namespace ?? 'default';
    if (v.emptyDir) return;
    if (v.configMap?.name) return this.writeFiles(dir, (await this.deps.readConfigMap(ns, v.configMap.name)) ?? {}, v.configMap.items);
    if (v.secret?.secretName) return this.writeFiles(dir, (await this.deps.readSecret(ns, v.secret.secretName)) ?? {}, v.secret.items);
    if (v.projected) {
      for (const s of v.projected.sources ?? []) {
        if (s.serviceAccountToken) {
          const token = await this.deps.requestToken(this.pod, s.serviceAccountToken.audience, s.serviceAccountToken.expirationSeconds ?? 3600);
          this.writeFile(dir, s.serviceAccountToken.path, token);
        } else if (s.configMap?.name) {
          const data = s.configMap.name === 'kube-root-ca.crt' ? { 'ca.crt': this.deps.caCert } : await this.deps.readConfigMap(ns, s.configMap.name);
          this.writeFiles(dir, data ?? {}, s.configMap.items);
        } else if (s.secret?.name) {
          this.writeFiles(dir, (await this.deps.readSecret(ns, s.secret.name)) ?? {}, s.secret.items);
        } else if (s.downwardAPI) {
          for (const item of s.downwardAPI.items ?? []) {
            const fieldPath = item.fieldRef?.fieldPath;
            if (fieldPath) this.writeFile(dir, item.path, fieldValue(this.pod, fieldPath, { ...this.deps.facts, hostname: this.hostname }));
          }
        }
      }
      return;
    }
    throw new Error(`volume ${v.name}: only emptyDir, configMap, secret and projected volumes are supported`);
  }

  private writeFiles(dir: string, data: Record<string, string>, items?: { key: string; path: string }[]): void {
    const pairs = items?.length ? items.map((i) => [i.path, data[i.key] ?? ''] as const) : Object.entries(data);
    for (const [path, content] of pairs) this.writeFile(dir, path, content);
  }

  private writeFile(dir: string, path: string, content: string): void {
    const target = join(dir, path);
    mkdirSync(join(target, '..'), { recursive: true });
    writeFileSync(`${target}.tmp`, content, { mode: 0o644 });
    renameSync(`${target}.tmp`, target);
  }

  // ---- termination ----

  /** SIGTERM every container, SIGKILL whatever is left after the grace period, stop the sandbox. */
  async stop(gracePeriodSeconds: number, why: string): Promise<void> {
    if (this.stopped) return;
    const first = !this.stopping;
    this.stopping = true;
    clearInterval(this.tokenTimer);
    const all = [...this.init, ...this.containers];
    for (const r of all) {
      clearTimeout(r.restartTimer);
      if (r.view.state.kind === 'waiting') {
        this.setState(r, { kind: 'terminated', exitCode: 0, reason: 'ContainerStatusUnknown', startedAt: this.startTime, finishedAt: new Date() });
      }
    }
    const live = all.filter((r) => r.child);
    if (first) {
      for (const r of live) {
        this.event({ event: 'signal', container: r.spec.name, pid: r.child?.pid, signal: 'SIGTERM', detail: why });
        r.child?.kill('SIGTERM');
      }
    }
    const exited = Promise.all(live.map((r) => r.exited));
    const timer = new Promise<'timeout'>((res) => setTimeout(() => res('timeout'), gracePeriodSeconds * 1000));
    if ((await Promise.race([exited, timer])) === 'timeout') {
      for (const r of all.filter((x) => x.child)) {
        this.event({ event: 'signal', container: r.spec.name, pid: r.child?.pid, signal: 'SIGKILL', detail: 'grace period over' });
        r.child?.kill('SIGKILL');
      }
      await exited;
    }
    if (!this.stopped) {
      this.stopped = true;
      this.sandbox?.process.kill('SIGKILL');
      this.event({ event: 'pod-stopped', detail: why });
      this.deps.changed();
    }
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
