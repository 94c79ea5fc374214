// Turns schema violations into the error body's detail lines: one line per violated field,
// naming its path.

import type { z } from 'zod';
import { validationFailed, type DomainError } from './errors.ts';

export const issuePath = (path: readonly PropertyKey[]): string =>
  path.length === 0
    ? '(body)'
    : path.reduce<string>(
        (acc, seg) => (typeof seg === 'number' ? `${acc}[${String(seg)}]` : acc === '' ? String(seg) : `${acc}.${String(seg)}`),
        '',
      );

/** More lines than anyone reads; a body with a million bad keys must not answer a million lines. */
const MAX_ERROR_LINES = 100;

export function issueLines(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[] = []): string[] {
  const lines = allIssueLines(issues.slice(0, MAX_ERROR_LINES + 1), prefix);
  if (lines.length <= MAX_ERROR_LINES && issues.length <= MAX_ERROR_LINES) return lines;
  return [
    ...lines.slice(0, MAX_ERROR_LINES),
    `… and more: ${String(issues.length)} problems in all, the first ${String(MAX_ERROR_LINES)} lines shown`,
  ];
}

function allIssueLines(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[]): string[] {
  return issues.flatMap((issue) => {
    const path = issuePath([...prefix, ...issue.path]);
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((k) => `${issuePath([...prefix, ...issue.path, k])}: unknown field`);
    }
    return [`${path}: ${issue.message}`];
  });
}

export const schemaViolation = (issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[] = []): DomainError =>
  validationFailed('Request does not match the schema', issueLines(issues, prefix));

/** Parses with a schema or throws the contract's 400 (one line per violated field). */
export function parseOrThrow<T extends z.ZodType>(schema: T, input: unknown, prefix: readonly PropertyKey[] = []): z.output<T> {
  const r = schema.safeParse(input);
  if (!r.success) throw schemaViolation(r.error.issues, prefix);
  return r.data;
}
