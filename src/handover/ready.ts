// The Ready condition of a node or a pod: what decisions read of their readiness.

interface WithConditions {
  status?: { conditions?: { type: string; status: string; reason?: string }[] };
}

export function readyCondition<C extends { type: string; status: string }>(o: { status?: { conditions?: C[] } } | undefined): C | undefined {
  return o?.status?.conditions?.find((c) => c.type === 'Ready');
}

export const isReady = (o: WithConditions | undefined): boolean => readyCondition(o)?.status === 'True';
