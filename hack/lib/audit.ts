// The API server's audit log of the operator's ServiceAccount (hack/cluster.sh audits it, metadata level, nobody
// else): what the operator really asked for, independent of its own metrics. Read by the RBAC and bad-input tests.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { localDir } from './cluster.js';
import { OPERATOR_NAMESPACE } from './operator.js';

export const OPERATOR_SA = `system:serviceaccount:${OPERATOR_NAMESPACE}:csi-handover`;

export interface AuditEvent {
  stage: string;
  verb: string;
  user: { username: string };
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string; apiGroup?: string };
  responseStatus?: { code?: number };
  stageTimestamp: string;
}

/**
 * The operator's audited requests since `since` (the cluster's start by default): one event per request, when it
 * completed — or, for a watch still open, when its response started.
 */
export function operatorAudit(since = 0, stages = ['ResponseComplete']): AuditEvent[] {
  return readFileSync(join(localDir, 'logs', 'audit.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter((e) => stages.includes(e.stage) && e.user.username === OPERATOR_SA && Date.parse(e.stageTimestamp) >= since);
}

export const WRITES = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
export const resourceOf = (e: AuditEvent): string =>
  `${e.objectRef?.apiGroup ? `${e.objectRef.apiGroup}/` : ''}${e.objectRef?.resource ?? ''}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
