// `admin history <resource> <idOrCode>`: every version of a record with its field-level changes
// (GET /api/v1/R/{idOrCode}/history, followed page by page).

import type { Command } from 'commander';
import { contextOf, resourcePath } from '../context.ts';
import { cell, printJson, table, writeOut } from '../output.ts';

type PatchOp = { op: string; path: string; value?: unknown };
type HistoryEntry = { version: number; type: string; at: string; actor: string; requestId?: string; changes: PatchOp[] };

const PAGE = 1000;

/** One row per changed field; the version's own columns on its first row only. */
export function historyRows(entries: readonly HistoryEntry[]): string[][] {
  return entries.flatMap((e) => {
    const changes = e.changes.length === 0 ? [undefined] : e.changes;
    return changes.map((c, i) => [
      i === 0 ? String(e.version) : '',
      i === 0 ? e.at : '',
      i === 0 ? e.actor : '',
      i === 0 ? e.type : '',
      c?.op ?? '',
      c?.path ?? '',
      c === undefined || c.op === 'remove' ? '' : cell(c.value),
    ]);
  });
}

export function registerHistory(program: Command): void {
  program
    .command('history')
    .description('Every version of a record: who, when, which event, and each field it changed (JSON Patch from the version before)')
    .argument('<resource>', 'the resource path, e.g. user-groups, users, access-rules')
    .argument('<idOrCode>', "the record's uuid or code")
    .addHelpText('after', "\nExamples:\n  admin history user-groups ADMINS\n  admin history users 6f1c…e2 --json | jq '.[].changes'")
    .action(async (resource: string, idOrCode: string, _options: unknown, command: Command) => {
      const { client, json } = contextOf(command);
      const path = `/api/v1/${resourcePath(resource)}/${encodeURIComponent(idOrCode)}/history`;
      const entries: HistoryEntry[] = [];
      for (let page = 0; ; page++) {
        const { body, headers } = await client.json<HistoryEntry[]>(path, { query: { page, size: PAGE } });
        entries.push(...body);
        const total = Number(headers.get('x-total-count') ?? entries.length);
        if (body.length < PAGE || entries.length >= total) break;
      }
      if (json) printJson(entries);
      else writeOut(table(['VERSION', 'AT', 'ACTOR', 'EVENT', 'OP', 'FIELD', 'VALUE'], historyRows(entries)));
    });
}
