// Prints the plain closing line CI reads ("N passed, N failed, N skipped") from vitest's JSON report.
import { readFileSync } from 'node:fs';

const file = process.argv[2];
let report;
try {
  report = JSON.parse(readFileSync(file, 'utf8'));
} catch (err) {
  console.log(`tests: no report at ${file} (${err.message})`);
  process.exit(1);
}
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
// A file can fail outside any test (a hook, an import): its tests are then skipped, and the file is what failed.
// (numFailedTestSuites also counts the describe blocks around a failed test, so it is not this.)
const files = (report.testResults ?? []).filter((f) => f.status === 'failed' && !(f.assertionResults ?? []).some((t) => t.status === 'failed')).length;
const fileNote = files > 0 ? ` (${files} test file${files === 1 ? '' : 's'} failed outside a test: a hook or an import)` : '';
console.log(`tests: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${skipped} skipped${fileNote}`);
