// The operator's own log level follows spec.operatorLogLevel: the most verbose any ClusterCSIDriver asks for, and
// never less than the level it was started with. Every replica follows it, so a standby that takes over logs at
// the level asked for.
import type { Logger } from 'pino';
import { type LogLevel, pinoLevelFor } from './verbosity.js';

type PinoLevel = 'info' | 'debug' | 'trace';
const rank: Record<PinoLevel, number> = { info: 0, debug: 1, trace: 2 };

export class OperatorLogLevel {
  private readonly asked = new Map<string, LogLevel>();
  private readonly floor: PinoLevel;

  constructor(
    private readonly log: Logger,
    started: string,
  ) {
    this.floor = started === 'debug' || started === 'trace' ? started : 'info';
  }

  /** What `driver` asks for now (undefined: nothing, or it is gone). */
  set(driver: string, level: LogLevel | undefined): void {
    if (level === undefined) this.asked.delete(driver);
    else this.asked.set(driver, level);
    let want = this.floor;
    for (const l of this.asked.values()) if (rank[pinoLevelFor(l)] > rank[want]) want = pinoLevelFor(l);
    if (this.log.level === want) return;
    this.log.info({ from: this.log.level, to: want }, 'operator log level changed by spec.operatorLogLevel');
    this.log.level = want;
  }
}
