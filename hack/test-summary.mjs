// Prints the plain closing line CI reads ("N passed, N failed, N skipped") from vitest's JSON reports (one per
// vitest run; their counts are summed).
import { readFileSync } from 'node:fs';

const reports = [];
for (const file of process.argv.slice(2)) {
  try {
    reports.push(JSON.parse(readFileSync(file, 'utf8')));
  } catch (err) {
    console.log(`tests: no report at ${file} (${err.message})`);
    process.exit(1);
  }
}
const sum = (key) => reports.reduce((n, r) => n + (r[key] ?? 0), 0);
const report = {
  numPassedTests: sum('numPassedTests'),
  numFailedTests: sum('numFailedTests'),
  numPendingTests: sum('numPendingTests'),
  numTodoTests: sum('numTodoTests'),
  testResults: reports.flatMap((r) => r.testResults ?? []),
};
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
// A file can fail outside any test (a hook, an import): its tests are then skipped, and the file is what failed.
// (numFailedTestSuites also counts the describe blocks around a failed test, so it is not this.)
const files = (report.testResults ?? []).filter((f) => f.status === 'failed' && !(f.assertionResults ?? []).some((t) => t.status === 'failed')).length;
const fileNote = files > 0 ? ` (${files} test file${files === 1 ? '' : 's'} failed outside a test: a hook or an import)` : '';
// Each failure, named, with the first lines of its message (no stack, no colours), just above the closing line: a
// CI log is often read from its tail, and vitest's own report of a failure is long and far above it.
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, 'g');
/** The first lines of a message: no colours, no stack frames, joined on one line. */
const firstLines = (text) =>
  String(text ?? '')
    .replace(ANSI, '')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('at '))
    .slice(0, 3)
    .join(' | ');
for (const f of report.testResults ?? []) {
  const where = String(f.name ?? '').replace(/^.*?\/test\//, 'test/');
  const failed = (f.assertionResults ?? []).filter((t) => t.status === 'failed');
  if (failed.length === 0 && f.status === 'failed') console.log(`FAILED ${where}: ${firstLines(f.message)}`);
  for (const t of failed) console.log(`FAILED ${where} > ${t.fullName ?? t.title}: ${firstLines((t.failureMessages ?? [])[0])}`);
}
console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped${fileNote}`);
