// ClusterCSIDriver spec.logLevel / spec.operatorLogLevel values and what they mean for klog and pino.

export const LOG_LEVELS = ['', 'Normal', 'Debug', 'Trace', 'TraceAll'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

// Same numbers as OpenShift library-go LogLevelToVerbosity, so drivers log as they would under the OpenShift operator.
const KLOG_VERBOSITY: Record<LogLevel, number> = { '': 2, Normal: 2, Debug: 4, Trace: 6, TraceAll: 8 };

const PINO_LEVEL: Record<LogLevel, 'info' | 'debug' | 'trace'> = {
  '': 'info',
  Normal: 'info',
  Debug: 'debug',
  Trace: 'trace',
  TraceAll: 'trace',
};

export function verbosityFor(logLevel: LogLevel): number {
  return KLOG_VERBOSITY[logLevel];
}

export function isLogLevel(v: unknown): v is LogLevel {
  return typeof v === 'string' && (LOG_LEVELS as readonly string[]).includes(v);
}

// pino has no level beyond trace, so TraceAll only matters for klog-based containers.
export function pinoLevelFor(logLevel: LogLevel): 'info' | 'debug' | 'trace' {
  return PINO_LEVEL[logLevel];
}
