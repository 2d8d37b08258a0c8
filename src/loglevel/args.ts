// Rewriting klog verbosity flags (--v / -v) in container args and commands, without touching anything else.
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';

export type ArgsRewrite =
  { kind: 'unchanged' } | { kind: 'changed'; args: string[]; from: number[] } | { kind: 'absent' } | { kind: 'malformed'; reason: string };

export interface ContainerPlan {
  container: string;
  init: boolean;
  field: 'args' | 'command';
  result: ArgsRewrite;
}

export type PodSpecRewrite = { kind: 'unchanged' } | { kind: 'changed'; spec: V1PodSpec; containers: string[] } | { kind: 'malformed'; reasons: string[] };

const SEPARATE_VALUE_FLAGS: readonly string[] = ['--v', '-v'];
const JOINED_VALUE_PREFIXES: readonly string[] = ['--v=', '-v='];
// klog parses the level with strconv.ParseInt, so a sign, a decimal point or blanks are not levels we can reason about.
const VERBOSITY_VALUE = /^\d+$/;

// Where one occurrence keeps its value: the element to overwrite and what precedes the number in it.
interface VerbosityValue {
  index: number;
  prefix: string;
  value: number;
}

export function rewriteVerbosity(args: readonly string[], target: number): ArgsRewrite {
  if (!Number.isSafeInteger(target) || target < 0) {
    throw new RangeError(`klog verbosity must be a non-negative integer, got ${target}`);
  }
  const values: VerbosityValue[] = [];
  // A separate value element is digits only, so it can never be mistaken for a flag on the next step.
  for (const [index, element] of args.entries()) {
    if (SEPARATE_VALUE_FLAGS.includes(element)) {
      const value = args[index + 1];
      if (value === undefined) return { kind: 'malformed', reason: `"${element}" at index ${index} has no value after it` };
      if (!VERBOSITY_VALUE.test(value)) {
        return { kind: 'malformed', reason: `"${element}" at index ${index} is followed by "${value}", which is not a non-negative integer` };
      }
      values.push({ index: index + 1, prefix: '', value: Number(value) });
      continue;
    }
    const prefix = JOINED_VALUE_PREFIXES.find((p) => element.startsWith(p));
    if (prefix === undefined) continue;
    const value = element.slice(prefix.length);
    if (!VERBOSITY_VALUE.test(value)) {
      return { kind: 'malformed', reason: `"${element}" at index ${index} does not have a non-negative integer value` };
    }
    values.push({ index, prefix, value: Number(value) });
  }
  if (values.length === 0) return { kind: 'absent' };
  // Compared as numbers: klog reads "04" as 4, so such a flag already gives the target verbosity.
  if (values.every((v) => v.value === target)) return { kind: 'unchanged' };
  const rewritten = [...args];
  for (const v of values) rewritten[v.index] = `${v.prefix}${target}`;
  return { kind: 'changed', args: rewritten, from: values.map((v) => v.value) };
}

function containersOf(spec: V1PodSpec): { container: V1Container; init: boolean }[] {
  return [...(spec.initContainers ?? []).map((container) => ({ container, init: true })), ...spec.containers.map((container) => ({ container, init: false }))];
}

// args first: the kubelet runs command followed by args, and klog takes the last --v it sees.
function planFor(container: V1Container, init: boolean, target: number): ContainerPlan {
  const inArgs = rewriteVerbosity(container.args ?? [], target);
  if (inArgs.kind !== 'absent') return { container: container.name, init, field: 'args', result: inArgs };
  const inCommand = rewriteVerbosity(container.command ?? [], target);
  if (inCommand.kind !== 'absent') return { container: container.name, init, field: 'command', result: inCommand };
  return { container: container.name, init, field: 'args', result: inArgs };
}

export function planVerbosity(spec: V1PodSpec, target: number): ContainerPlan[] {
  return containersOf(spec).map(({ container, init }) => planFor(container, init, target));
}

export function rewritePodSpecVerbosity(spec: V1PodSpec, target: number): PodSpecRewrite {
  const rewritten = structuredClone(spec);
  // Planned on the copy so each plan is applied to the very container it was made from.
  const planned = containersOf(rewritten).map(({ container, init }) => ({ container, plan: planFor(container, init, target) }));
  const reasons = planned.flatMap(({ plan }) => (plan.result.kind === 'malformed' ? [`container "${plan.container}": ${plan.result.reason}`] : []));
  // A flag we cannot read might be the one that matters, so nothing is changed until every container is understood.
  if (reasons.length > 0) return { kind: 'malformed', reasons };
  const changed: string[] = [];
  for (const { container, plan } of planned) {
    if (plan.result.kind !== 'changed') continue;
    container[plan.field] = plan.result.args;
    changed.push(plan.container);
  }
  if (changed.length === 0) return { kind: 'unchanged' };
  return { kind: 'changed', spec: rewritten, containers: changed };
}
