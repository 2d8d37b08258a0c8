// Writes a driver's status where it belongs: our conditions (and, in standalone mode, what the CRD's owner would
// write) on its ClusterCSIDriver, the full report in its CSIHandoverReport. Each by server-side apply with our field
// manager, only when it differs from what is there. A write the API server refuses is not retried blind: the part
// it refused is left out (src/status/status-parts.ts) so the rest still goes, and that part's content is remembered
// for a while, logged once, counted and told in a Warning Event; new content is tried again.
import type { Logger } from 'pino';
import { GROUP, KIND, objectPath, VERSION } from '../../api/clustercsidriver.js';
import { REPORT_API_VERSION, REPORT_KIND, reportPath } from '../../api/handover-report.js';
import { FIELD_MANAGER } from '../../api/names.js';
import type { Clock } from '../../clock.js';
import type { EventRecorder } from '../../kube/events.js';
import type { KubeHttp } from '../../kube/http.js';
import type { Metrics } from '../../metrics.js';
import { classifyWriteFailure, partKey, partsToSend, type StatusPart, statusOf } from '../../status/status-parts.js';

/** A refused part is not sent again with the same content for this long (then once more: an admin may have fixed it). */
export const REFUSAL_REMEMBERED_MS = 10 * 60_000;

export interface DriverRef {
  name: string;
  uid: string;
}

type Resource = 'clustercsidrivers' | 'csihandoverreports';

export class StatusWriter {
  /** object (resource/name/uid) → refused part key → when it may be tried again */
  private readonly refused = new Map<string, Map<string, number>>();

  constructor(private readonly d: { http: KubeHttp; log: Logger; metrics: Metrics; events?: EventRecorder; now: Clock }) {}

  /** Our status parts on the ClusterCSIDriver; `upToDate` says whether a body already reads so on the CR. */
  async driverStatus(cr: DriverRef, parts: StatusPart[], upToDate: (status: Record<string, unknown>) => boolean): Promise<void> {
    await this.applyParts('clustercsidrivers', cr, parts, upToDate, (status) =>
      this.d.http.apply(`${objectPath(cr.name)}/status`, { apiVersion: `${GROUP}/${VERSION}`, kind: KIND, metadata: { name: cr.name }, status }, FIELD_MANAGER),
    );
  }

  /**
   * The driver's CSIHandoverReport with this status. `existing` is the report object there is now, by the UID of the
   * CR it belongs to: missing, or one of an older CR of the same name, it is (re)made first, owned by this CR.
   */
  async report(
    cr: DriverRef,
    status: Record<string, unknown>,
    existing: { uid: string | undefined; ownerUid: string | undefined; upToDate: boolean } | undefined,
  ): Promise<void> {
    if (existing && existing.ownerUid === cr.uid && existing.upToDate) return;
    const part: StatusPart = { name: 'report', required: true, fields: status };
    await this.applyParts(
      'csihandoverreports',
      cr,
      [part],
      () => false,
      async (body) => {
        // That very object (by its UID): the cache may still show it after its successor was made.
        if (existing && existing.ownerUid !== cr.uid) {
          await this.d.http
            .request('DELETE', reportPath(cr.name), { body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: existing.uid } } })
            .catch(() => undefined);
        }
        if (!existing || existing.ownerUid !== cr.uid) await this.d.http.apply(reportPath(cr.name), reportObject(cr), FIELD_MANAGER);
        await this.d.http.apply(`${reportPath(cr.name)}/status`, { ...reportObject(cr), status: body }, FIELD_MANAGER);
      },
    );
  }

  /** Forget what a CR of this name was refused (it is gone). */
  forget(name: string): void {
    for (const key of this.refused.keys()) if (key.split('/')[1] === name) this.refused.delete(key);
  }

  private refusedOf(key: string): Set<string> {
    const now = this.d.now();
    const m = this.refused.get(key);
    if (!m) return new Set();
    for (const [k, until] of m) if (until <= now) m.delete(k);
    return new Set(m.keys());
  }

  private async applyParts(
    resource: Resource,
    cr: DriverRef,
    parts: StatusPart[],
    upToDate: (status: Record<string, unknown>) => boolean,
    write: (status: Record<string, unknown>) => Promise<unknown>,
  ): Promise<void> {
    const key = `${resource}/${cr.name}/${cr.uid}`;
    const send = partsToSend(parts, this.refusedOf(key));
    if (!send || upToDate(statusOf(send))) return;
    const tryWrite = async (ps: StatusPart[]): Promise<unknown> => {
      try {
        await write(statusOf(ps));
        this.d.metrics.statusWrites.inc({ resource });
        return undefined;
      } catch (err) {
        const reason = classifyWriteFailure(err);
        this.d.metrics.statusWriteFailures.inc({ resource, reason });
        if (reason === 'transient') throw err; // the work queue retries with backoff
        return err;
      }
    };
    const err = await tryWrite(send);
    if (err === undefined) return;
    // Refused: find the parts it refuses, the required ones first, then each other on top of what was accepted.
    const required = send.filter((p) => p.required);
    if (required.length === send.length) return this.remember(key, cr, resource, send, err);
    if (required.length) {
      const e = await tryWrite(required);
      if (e !== undefined) return this.remember(key, cr, resource, required, e);
    }
    const optional = send.filter((x) => !x.required);
    // The required parts went alone: with one other part, the first refusal was that part's (not sent twice).
    const [only] = optional;
    if (only && optional.length === 1) return this.remember(key, cr, resource, [only], err);
    const accepted = [...required];
    for (const p of optional) {
      const e = await tryWrite([...accepted, p]);
      if (e === undefined) accepted.push(p);
      else this.remember(key, cr, resource, [p], e);
    }
  }

  private remember(key: string, cr: DriverRef, resource: Resource, parts: StatusPart[], err: unknown): void {
    const m = this.refused.get(key) ?? new Map<string, number>();
    for (const p of parts) m.set(partKey(p), this.d.now() + REFUSAL_REMEMBERED_MS);
    this.refused.set(key, m);
    const what = parts.map((p) => p.name).join(', ');
    const reason = classifyWriteFailure(err);
    this.d.log.warn({ driver: cr.name, resource, parts: what, reason, err: String(err) }, 'status write refused: left out until its content changes');
    void this.d.events?.emit(
      { apiVersion: `${GROUP}/${VERSION}`, kind: KIND, name: cr.name, uid: cr.uid },
      'Warning',
      'StatusWriteRefused',
      `the API server refused ${what} on ${resource} ${cr.name} (${reason}): ${String(err).slice(0, 600)}; ` +
        'the rest of the status is written, and this is not sent again until it changes',
    );
  }
}

function reportObject(cr: DriverRef): Record<string, unknown> {
  return {
    apiVersion: REPORT_API_VERSION,
    kind: REPORT_KIND,
    metadata: {
      name: cr.name,
      ownerReferences: [{ apiVersion: `${GROUP}/${VERSION}`, kind: KIND, name: cr.name, uid: cr.uid }],
    },
  };
}
