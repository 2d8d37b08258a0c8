import { describe, expect, it } from 'vitest';
import { isLogLevel, LOG_LEVELS, pinoLevelFor, verbosityFor, type LogLevel } from '../../src/loglevel/verbosity.js';

const levels: [LogLevel, number, 'info' | 'debug' | 'trace'][] = [
  ['', 2, 'info'],
  ['Normal', 2, 'info'],
  ['Debug', 4, 'debug'],
  ['Trace', 6, 'trace'],
  ['TraceAll', 8, 'trace'],
];

describe('verbosityFor and pinoLevelFor', () => {
  it('the table below covers every log level', () => expect(levels.map(([level]) => level)).toEqual([...LOG_LEVELS]));
  it.each(levels)('%j → klog -v=%i, pino %s', (level, verbosity, pinoLevel) => {
    expect(verbosityFor(level)).toBe(verbosity);
    expect(pinoLevelFor(level)).toBe(pinoLevel);
  });
});

describe('isLogLevel', () => {
  it.each(LOG_LEVELS.map((level) => [level]))('accepts %j', (level) => expect(isLogLevel(level)).toBe(true));
  it.each([['normal'], ['TRACE'], ['Info'], [' Normal'], ['Trace All'], [undefined], [null], [2], [{}], [['Normal']]])('rejects %j', (value) =>
    expect(isLogLevel(value)).toBe(false),
  );
});
