// JSON logs (pino) on stderr, with a level that can change at run time.
import { destination, pino, type Logger } from 'pino';

export function makeLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, base: { name } }, destination(2));
}
