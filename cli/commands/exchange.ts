// `admin export <resource>` writes the service's export object to stdout; `admin import <resource>
// <file>` uploads one (multipart field `file`) and summarises the diff the service answers
// (saved with --save). Both show a byte progress bar on a terminal.

import type { Command } from 'commander';
import { InvalidArgumentError, Option } from 'commander';
import { open, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { randomUUID } from 'node:crypto';
import { contextOf, resourcePath } from '../context.ts';
import { CliError, EXIT, cell, printJson, progressBar, table, writeErr, writeOut, type Progress } from '../output.ts';
import { chunksOf, unreachable, type ApiClient } from '../client.ts';
import { followJob, milliseconds } from '../jobs.ts';
import { deepEqual } from '../../domain/shared/json.ts';

const OPERATORS = ['EQ', 'NOT_EQ', 'LIKE', 'NOT_LIKE', 'IN', 'NOT_IN', 'GT', 'GTE', 'LT', 'LTE', 'IS_NULL', 'IS_NOT_NULL'] as const;
type FilterItem = { column: string; operator: string; value?: string; values?: string[] };

type DiffEntry = {
  diffType: string;
  left?: Record<string, unknown> | null;
  right?: Record<string, unknown> | null;
  error?: { code?: string; message?: string };
};

const CHUNK = 256 * 1024;

/** `column:OPERATOR[:value]`; IN and NOT_IN take comma-separated values. */
export function parseFilter(spec: string, previous: FilterItem[] = []): FilterItem[] {
  const [column = '', operator = '', ...rest] = spec.split(':');
  const value = rest.join(':');
  const op = operator.toUpperCase();
  if (column === '' || !(OPERATORS as readonly string[]).includes(op)) {
    throw new InvalidArgumentError(`expected column:OPERATOR[:value] with OPERATOR one of ${OPERATORS.join(', ')}`);
  }
  const item: FilterItem =
    op === 'IN' || op === 'NOT_IN'
      ? { column, operator: op, values: value.split(',') }
      : op === 'IS_NULL' || op === 'IS_NOT_NULL'
        ? { column, operator: op }
        : { column, operator: op, value };
  return [...previous, item];
}

export function registerExchange(program: Command): void {
  program
    .command('export')
    .description("Write the export object of a resource's records (POST /api/v1/R/export) to stdout")
    .argument('<resource>', 'the resource path, e.g. user-groups, users, access-rules')
    .option(
      '--filter <column:OPERATOR:value>',
      'only records matching it (repeat to AND them); IN and NOT_IN take a,b,c; IS_NULL takes no value',
      parseFilter,
      [],
    )
    .option('--compare-field <field>', 'the field the export names for matching on import (default id)')
    .addHelpText(
      'after',
      '\nExamples:\n  admin export user-groups > groups.json\n  admin export users --filter status:EQ:ENABLE --filter code:LIKE:ops% > users.json',
    )
    .action(async (resource: string, options: { filter: FilterItem[]; compareField?: string }, command: Command) => {
      const { client } = contextOf(command);
      const path = resourcePath(resource);
      const response = await client.send(`/api/v1/${path}/export`, {
        json: {
          entityType: path,
          filtering: options.filter,
          ...(options.compareField === undefined ? {} : { compareField: options.compareField }),
        },
      });
      const length = Number(response.headers.get('content-length') ?? 0);
      const bar = progressBar('{label} [{bar}] {percentage}% | {value}/{total} bytes');
      const chunks: Buffer[] = [];
      let received = 0;
      bar.start(length > 0 ? length : 1, { label: 'export' });
      try {
        for await (const chunk of chunksOf(response)) {
          chunks.push(Buffer.from(chunk));
          received += chunk.byteLength;
          if (length > 0) bar.update(received);
        }
        bar.complete();
      } catch (error) {
        throw unreachable(client.base, error);
      } finally {
        bar.stop();
      }
      const text = Buffer.concat(chunks).toString('utf8');
      writeOut(text);
      if (process.stderr.isTTY) writeErr(`exported ${String(countRecords(text))} ${path} record(s), ${String(received)} bytes`);
    });

  program
    .command('import')
    .description('Upload an export object (POST /api/v1/R/import) and show the diff against the records stored here; --save applies it')
    .argument('<resource>', 'the resource path, e.g. user-groups, users, access-rules')
    .argument('<file>', 'an export object as JSON, e.g. written by `admin export`')
    .option('--save', 'apply the diff (create, replace, delete); without it nothing is written', false)
    .option('--compare-field <field>', 'the field that matches an incoming record with a stored one', 'id')
    .option(
      '--allow-mass-remove',
      "with --save, delete however many records are only here (beyond the service's MASS_REMOVE_PERCENT it refuses without it)",
      false,
    )
    .addOption(new Option('--show <n>', 'diff entries listed in the table (the summary counts all)').default(20).argParser(wholeNumber))
    .option('--interval <ms>', 'how often to read the job a large --save runs as', milliseconds, 500)
    .addHelpText(
      'after',
      '\nExamples:\n  admin import user-groups groups.json            # dry run: the diff only\n  admin import user-groups groups.json --save --compare-field code\n  admin import users users.json --save --allow-mass-remove   # when most users here are not in the file',
    )
    .addHelpText(
      'after',
      "\nExits 1 when an entry could not be saved (the others were). Above the service's DIFF_APPLY_JOB_THRESHOLD a --save runs as a job: its progress bar is shown until it ends.",
    )
    .action(async (resource: string, file: string, options: ImportOptions, command: Command) => {
      const { client, json } = contextOf(command);
      const path = resourcePath(resource);
      const records = await checkExportFile(file);
      const upload = await multipart(file, progressBar('{label} [{bar}] {percentage}% | {value}/{total} bytes'));
      const answer = await client
        .json<DiffEntry[] | { jobId: string }>(`/api/v1/${path}/import`, {
          query: { save: options.save, compareField: options.compareField, ...(options.allowMassRemove ? { allowMassRemove: true } : {}) },
          body: { stream: upload.stream, headers: upload.headers },
        })
        .catch((error: unknown) => {
          // The service names its query parameter; here it is an option.
          if (error instanceof CliError && error.message.includes('DIFF.MASS_REMOVE'))
            throw new CliError(`${error.message}; --allow-mass-remove sends it`, error.exitCode, error.status);
          throw error;
        });
      if (answer.status === 202 && !Array.isArray(answer.body)) {
        await appliedAsJob(client, answer.body.jobId, { json, records, interval: options.interval });
        return;
      }
      const diff = answer.body as DiffEntry[];
      if (json) printJson(diff);
      else writeOut(diffSummary(diff, { records, save: options.save, show: options.show, compareField: options.compareField }));
      const failed = diff.filter((d) => d.error !== undefined).length;
      if (failed > 0)
        throw new CliError(`${String(failed)} of ${String(diff.length)} entries were not saved (see their error)`, EXIT.failed);
    });
}

type ImportOptions = { save: boolean; compareField: string; allowMassRemove: boolean; show: number; interval: number };

type ApplyResult = {
  applied?: number;
  unchanged?: number;
  failed?: number;
  of?: number;
  failures?: { index: number; diffType: string; error: { code?: string; message?: string } }[];
};

/** A large --save: the service applies the diff as a DIFF_APPLY job; its bar until it ends. */
async function appliedAsJob(client: ApiClient, jobId: string, o: { json: boolean; records: number; interval: number }): Promise<void> {
  const job = await followJob(client, jobId, o.interval, progressBar('{label} [{bar}] {percentage}% | {value}/{total} {unit}'));
  if (o.json) printJson(job);
  if (job.status === 'FAILED')
    throw new CliError(`the import's apply job ${job.id} failed: ${job.data?.failure ?? 'no reason given'}`, EXIT.failed);
  const result = { applied: 0, unchanged: 0, failed: 0, of: 0, failures: [], ...(job.data?.result as ApplyResult | undefined) };
  if (!o.json) {
    writeOut(
      `${String(o.records)} record(s) in the file; saved by job ${job.id}: ${String(result.applied)} applied, ${String(result.unchanged)} unchanged, ` +
        `${String(result.failed)} failed of ${String(result.of)} diff entries`,
    );
    if (result.failures.length > 0)
      writeOut(
        `\n${table(
          ['ENTRY', 'DIFF', 'ERROR'],
          result.failures.map((f) => [
            String(f.index),
            f.diffType.replace('DIFF_TYPE_', ''),
            cell(`${f.error.code ?? ''} ${f.error.message ?? ''}`, 100),
          ]),
        )}`,
      );
  }
  if (result.failed > 0)
    throw new CliError(`${String(result.failed)} of ${String(result.of)} entries were not saved (job ${job.id})`, EXIT.failed);
}

function wholeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('a whole number');
  return n;
}

function countRecords(text: string): number {
  try {
    const parsed = JSON.parse(text) as { data?: unknown };
    return Array.isArray(parsed.data) ? parsed.data.length : 0;
  } catch {
    return 0;
  }
}

/** A readable export object: a clear local error instead of uploading megabytes the server refuses. */
async function checkExportFile(file: string): Promise<number> {
  let text: string;
  try {
    const handle = await open(file);
    try {
      text = await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (error) {
    throw new CliError(`cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, EXIT.failed);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new CliError(`${file} is not JSON: ${error instanceof Error ? error.message : String(error)}`, EXIT.failed);
  }
  const data = (parsed as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) throw new CliError(`${file} is not an export object: it has no "data" array`, EXIT.failed);
  return data.length;
}

/** The file as the body of a multipart/form-data request, read in chunks that move the bar. */
async function multipart(file: string, bar: Progress): Promise<{ stream: ReadableStream<Uint8Array>; headers: Record<string, string> }> {
  const boundary = `----admin-cli-${randomUUID()}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${basename(file).replace(/["\r\n]/g, '_')}"\r\nContent-Type: application/json\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  const size = (await stat(file)).size;
  async function* parts(): AsyncGenerator<Uint8Array> {
    yield head;
    const handle = await open(file);
    bar.start(size, { label: 'upload' });
    try {
      let sent = 0;
      for (;;) {
        const buffer = Buffer.alloc(CHUNK);
        const { bytesRead } = await handle.read(buffer, 0, CHUNK, sent);
        if (bytesRead === 0) break;
        sent += bytesRead;
        bar.update(sent);
        yield buffer.subarray(0, bytesRead);
      }
      bar.update(sent, { label: 'sent, diffing' });
    } finally {
      bar.stop();
      await handle.close();
    }
    yield tail;
  }
  return {
    stream: ReadableStream.from(parts()),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, 'content-length': String(head.length + size + tail.length) },
  };
}

/** Counts by kind, then the first entries: what is new, what changes (which fields), what goes. */
export function diffSummary(diff: readonly DiffEntry[], o: { records: number; save: boolean; show: number; compareField: string }): string {
  const count = (type: string) => diff.filter((d) => d.diffType === type).length;
  const lines = [
    `${String(o.records)} record(s) in the file: ${String(count('DIFF_TYPE_NEW'))} new, ${String(count('DIFF_TYPE_CHANGE'))} changed, ${String(count('DIFF_TYPE_REMOVE'))} only here` +
      ` (matched on ${o.compareField}); ${o.save ? savedLine(diff) : 'nothing saved (dry run: --save applies it)'}`,
  ];
  if (diff.length === 0 || o.show === 0) return lines.join('\n');
  const rows = diff.slice(0, o.show).map((d) => {
    const record = d.right ?? d.left ?? {};
    const fields = d.diffType === 'DIFF_TYPE_CHANGE' ? changedFields(d).join(', ') : '';
    return [
      d.diffType.replace('DIFF_TYPE_', ''),
      cell(record.id, 36),
      cell(record.code, 30),
      d.error === undefined ? fields : `NOT SAVED: ${cell(`${d.error.code ?? ''} ${d.error.message ?? ''}`, 80)}`,
    ];
  });
  lines.push('', table(['DIFF', 'ID', 'CODE', 'FIELDS'], rows));
  if (diff.length > o.show) lines.push(`… ${String(diff.length - o.show)} more (--show or --json for all)`);
  return lines.join('\n');
}

function savedLine(diff: readonly DiffEntry[]): string {
  const failed = diff.filter((d) => d.error !== undefined).length;
  return failed === 0 ? 'saved' : `saved but ${String(failed)} entr${failed === 1 ? 'y' : 'ies'} failed (NOT SAVED below)`;
}

function changedFields(d: DiffEntry): string[] {
  const left = d.left ?? {};
  const right = d.right ?? {};
  const keys = new Set([...Object.keys(left), ...Object.keys(right)]);
  keys.delete('auditInfo');
  return [...keys].filter((k) => !deepEqual(left[k], right[k])).sort();
}
