// How a zod refusal reads in errors, logs and conditions: every issue, where it is and what is wrong with it.
import type { z } from 'zod';

export function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
}
