// The diff of an imported export file of any size, holding no record but the one at hand. The file is read as it
// arrives (ExportFileParser: one item of `data` at a time); each item, checked against the
// resource's schema, is appended to a temporary file (one JSON line per item) and indexed by a
// 48-bit hash of its compare-field value in typed arrays (about 33 bytes per item: no string per
// item is kept in memory). The records here are then read a keyset page at a time: each is matched
// through the index (the candidate items read back from the temporary file and their values
// compared, so a hash collision never matches wrong records), CHANGE and REMOVE entries are
// appended to a second temporary file, then NEW for every item not matched. The answer and an
// apply read the entries back from that file a line at a time; close() deletes both files. A
// process killed meanwhile cannot: its folder is named after its pid, and sweepStaleImports, run when
// a service starts, deletes the folders of processes that have ended.

import { createHash } from 'node:crypto';
import { closeSync, createReadStream, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { checkCompareField, exportObjectSchema, keyOf, notUnique, sameRecord, type DiffEntry } from '../domain/resource/exchange.ts';
import { validationFailed } from '../domain/shared/errors.ts';
import type { FilterItem } from '../domain/shared/filtering.ts';
import type { JsonObject } from '../domain/shared/json.ts';
import { scanJsonText } from '../domain/shared/jsonText.ts';
import { issueLines } from '../domain/shared/validation.ts';
import { jsonProblem } from './errorHandler.ts';
import { ExportFileParser, notJsonAt } from './exportFileParser.ts';

/** An import's folder under the system's temporary folder: `admin-import-<pid>-XXXXXX`. */
export const IMPORT_FOLDER_PREFIX = 'admin-import-';
const IMPORT_FOLDER = new RegExp(`^${IMPORT_FOLDER_PREFIX}(\\d{1,10})-[^/]{6}$`);

const MAX_PROBLEMS = 100;
const MAX_ITEM_DEPTH = 30;
const WRITE_BUFFER = 32 * 1024;

/** An append-only file of JSON lines with the offset of each, read back by index or in order. */
class Spool {
  readonly path: string;
  private readonly fd: number;
  private offsets = new Float64Array(1024);
  private pending: string[] = [];
  private pendingChars = 0;
  private written = 0;
  private end = 0;
  count = 0;

  constructor(dir: string, name: string) {
    this.path = join(dir, name);
    this.fd = openSync(this.path, 'w+');
  }

  append(line: string): void {
    if (this.count + 2 >= this.offsets.length) {
      const grown = new Float64Array(this.offsets.length * 2);
      grown.set(this.offsets);
      this.offsets = grown;
    }
    this.offsets[this.count] = this.end;
    this.end += Buffer.byteLength(line) + 1;
    this.count++;
    this.offsets[this.count] = this.end;
    this.pending.push(line, '\n');
    this.pendingChars += line.length + 1;
    if (this.pendingChars >= WRITE_BUFFER) this.flush();
  }

  flush(): void {
    if (this.pending.length === 0) return;
    const bytes = Buffer.from(this.pending.join(''));
    writeSync(this.fd, bytes, 0, bytes.length, this.written);
    this.written += bytes.length;
    this.pending = [];
    this.pendingChars = 0;
  }

  /** The line of item i. */
  read(i: number): JsonObject {
    const start = this.offsets[i] ?? 0;
    const stop = this.offsets[i + 1] ?? 0;
    if (stop > this.written) this.flush();
    const buffer = Buffer.allocUnsafe(stop - start - 1);
    readSync(this.fd, buffer, 0, buffer.length, start);
    return JSON.parse(buffer.toString('utf8')) as JsonObject;
  }

  /** Every line in order. */
  async *lines(): AsyncGenerator<JsonObject> {
    this.flush();
    // Nothing written (an empty data array, an empty diff): no line (a read stream takes no end of -1).
    if (this.written === 0) return;
    const input = createReadStream(this.path, { encoding: 'utf8', start: 0, end: this.written - 1 });
    const reader = createInterface({ input, crlfDelay: Number.POSITIVE_INFINITY });
    try {
      for await (const line of reader) if (line !== '') yield JSON.parse(line) as JsonObject;
    } finally {
      reader.close();
      input.destroy();
    }
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** Item indexes by a 48-bit hash of their key (open addressing; several items may share a hash). */
class KeyIndex {
  private hashes = new Float64Array(1 << 12);
  private items = new Int32Array(1 << 12);
  private size = 0;

  static hash(key: string): number {
    const hash = createHash('sha1').update(key).digest().readUIntBE(0, 6);
    return hash === 0 ? 1 : hash;
  }

  *candidates(hash: number): Generator<number> {
    const mask = this.hashes.length - 1;
    for (let slot = hash % this.hashes.length; this.hashes[slot] !== 0; slot = (slot + 1) & mask)
      if (this.hashes[slot] === hash) yield this.items[slot] ?? -1;
  }

  add(hash: number, item: number): void {
    if ((this.size + 1) * 2 > this.hashes.length) this.grow();
    const mask = this.hashes.length - 1;
    let slot = hash % this.hashes.length;
    while (this.hashes[slot] !== 0) slot = (slot + 1) & mask;
    this.hashes[slot] = hash;
    this.items[slot] = item;
    this.size++;
  }

  private grow(): void {
    const { hashes, items } = this;
    this.hashes = new Float64Array(hashes.length * 2);
    this.items = new Int32Array(items.length * 2);
    this.size = 0;
    hashes.forEach((h, slot) => {
      if (h !== 0) this.add(h, items[slot] ?? -1);
    });
  }
}

/** What the route supplies: the resource, the records here for a filtering (keyset order). */
export type ImportSource = {
  def: ResourceDefinition;
  /** compareField of the query, if given (it wins over the file's). */
  asked: string | undefined;
  /** Checks a filtering (400 naming the bad item) before anything is compared. */
  checkFilter: (filter: readonly FilterItem[]) => void;
  here: (filter: readonly FilterItem[]) => AsyncIterable<JsonObject>;
  /** Whether another record here holds this value of the compare field (a suspected repeat). */
  heldTwice: (field: string, key: string) => Promise<boolean>;
};

/** The diff of an imported file, its entries in a temporary file. */
/** `removals`: how many of its entries are DIFF_TYPE_REMOVE. */
export type ImportedDiff = {
  compareField: string;
  count: number;
  removals: number;
  entries: () => AsyncIterable<DiffEntry>;
  close: () => void;
};

/** Whether a prefix of a JSON text may still begin a valid one (its only fault is that it ends). */
function fineSoFar(text: string, length: number): boolean {
  try {
    JSON.parse(text.slice(0, length));
    return true;
  } catch (error) {
    const message = error instanceof Error ? error.message : '';
    const at = /at position (\d+)/.exec(message)?.[1];
    return message.includes('Unexpected end') || (at !== undefined && Number(at) >= length);
  }
}

/** Where in a text JSON.parse refuses goes wrong (V8 names no position for an unexpected token):
 * the shortest prefix that can no longer begin a valid text, found by halving (an error path only). */
function problemAt(text: string): number {
  let fine = 0;
  let bad = text.length;
  while (bad - fine > 1) {
    const mid = Math.floor((fine + bad) / 2);
    if (fineSoFar(text, mid)) fine = mid;
    else bad = mid;
  }
  return bad - 1;
}

/** A syntax error inside one value of the file, at its position in the file. */
function itemJson(text: string, at: number): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const problem = jsonProblem(error instanceof Error ? error.message : String(error));
    const local = /at position (\d+)/.exec(problem)?.[1];
    const what = problem.replace(/ at position \d+.*$/, '');
    if (what === 'unexpected end of input') throw notJsonAt('unexpected end of a value', at + text.length);
    throw notJsonAt(what, at + (local === undefined ? problemAt(text) : Number(local)));
  }
}

class Incoming {
  readonly problems: string[] = [];
  readonly keyProblems: string[] = [];
  readonly index = new KeyIndex();
  readonly head: Record<string, unknown> = {};
  field: string | undefined;
  sawData = false;

  readonly def: ResourceDefinition;
  readonly items: Spool;

  constructor(def: ResourceDefinition, items: Spool) {
    this.def = def;
    this.items = items;
  }

  take(piece: ReturnType<ExportFileParser['feed']>[number]): void {
    const value = itemJson(piece.text, piece.at);
    const scan = scanJsonText(piece.text, MAX_ITEM_DEPTH, 5);
    const where = piece.kind === 'item' ? `data[${String(piece.index)}]` : piece.key;
    if (scan.errors.length > 0) {
      const message = scan.tooDeep
        ? `The file nests deeper than ${String(MAX_ITEM_DEPTH + 2)} levels`
        : 'The file would not be stored as sent';
      throw validationFailed(
        message,
        scan.errors.map((e) => `file: ${where}: ${e}`),
      );
    }
    if (piece.kind === 'member') {
      this.head[piece.key] = value;
      return;
    }
    const parsed = this.def.input.safeParse(value);
    if (!parsed.success) {
      if (this.problems.length < MAX_PROBLEMS) this.problems.push(...issueLines(parsed.error.issues, ['data', piece.index]));
      return;
    }
    if (this.problems.length > 0) return;
    const record = parsed.data as JsonObject;
    this.items.append(JSON.stringify(record));
    this.field ??= this.fieldNow();
    this.indexItem(piece.index, record);
  }

  /** The compare field as known when the first item comes: the query's, else the file's so far, else id. */
  private fieldNow(): string {
    const fromFile = this.head.compareField;
    return checkCompareField(this.def, this.askedField ?? (typeof fromFile === 'string' ? fromFile : 'id'));
  }

  askedField: string | undefined;

  indexItem(i: number, record: JsonObject): void {
    const field = this.field ?? 'id';
    const key = keyOf(record, field);
    if (key === undefined) {
      this.keyProblems.push(`data[${String(i)}].${field}: missing (every record needs a value to be matched by)`);
      return;
    }
    const hash = KeyIndex.hash(key);
    for (const other of this.index.candidates(hash)) {
      if (keyOf(this.items.read(other), field) === key) {
        this.keyProblems.push(`data[${String(i)}].${field}: ${key} is also the value of data[${String(other)}]`);
        return;
      }
    }
    this.index.add(hash, i);
  }

  /** The item whose key this is, if any. */
  find(key: string, field: string): number | undefined {
    for (const i of this.index.candidates(KeyIndex.hash(key))) if (keyOf(this.items.read(i), field) === key) return i;
    return undefined;
  }
}

async function readFile(chunks: AsyncIterable<Buffer> | Iterable<Buffer>, incoming: Incoming): Promise<void> {
  const parser = new ExportFileParser();
  const decoder = new TextDecoder('utf-8', { fatal: true });
  const decode = (bytes: Buffer | undefined): string => {
    try {
      return bytes === undefined ? decoder.decode() : decoder.decode(bytes, { stream: true });
    } catch {
      throw validationFailed('The file is not UTF-8 text', ['file: bytes that are not UTF-8']);
    }
  };
  for await (const chunk of chunks) for (const piece of parser.feed(decode(chunk))) incoming.take(piece);
  for (const piece of parser.feed(decode(undefined))) incoming.take(piece);
  parser.end();
  incoming.sawData = parser.sawData;
}

/** The head of the file checked, the compare field settled (items indexed again if the file names
 * its compare field after its data). */
async function settled(source: ImportSource, incoming: Incoming): Promise<{ field: string; filter: FilterItem[] }> {
  const { def } = source;
  if (!incoming.sawData || Object.hasOwn(incoming.head, 'data'))
    throw validationFailed('The file is not an export object', ['(file).data: required, an array of records']);
  incoming.head.data = [];
  if (incoming.problems.length > 0)
    throw validationFailed(`The file does not hold ${def.name} records as exported`, incoming.problems.slice(0, MAX_PROBLEMS));
  const head = exportObjectSchema(def).safeParse(incoming.head);
  if (!head.success) throw validationFailed(`The file does not hold ${def.name} records as exported`, issueLines(head.error.issues));
  const fromFile = head.data.compareField;
  const field = checkCompareField(def, source.asked ?? fromFile ?? 'id');
  if (incoming.field !== undefined && incoming.field !== field) {
    // The file named its compare field after its data: index the items again by it.
    incoming.field = field;
    incoming.keyProblems.length = 0;
    Object.assign(incoming, { index: new KeyIndex() });
    let i = 0;
    for await (const record of incoming.items.lines()) incoming.indexItem(i++, record);
  }
  if (incoming.keyProblems.length > 0) throw notUnique('in the incoming data', field, incoming.keyProblems);
  source.checkFilter(head.data.filtering);
  return { field, filter: head.data.filtering };
}

/** Reads the file and writes its diff; the caller closes the answer (its temporary files). */
export async function importDiff(source: ImportSource, chunks: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<ImportedDiff> {
  const dir = mkdtempSync(join(tmpdir(), `${IMPORT_FOLDER_PREFIX}${String(process.pid)}-`));
  const items = new Spool(dir, 'items.jsonl');
  const entries = new Spool(dir, 'entries.jsonl');
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    items.close();
    entries.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const incoming = new Incoming(source.def, items);
    incoming.askedField = source.asked;
    await readFile(chunks, incoming);
    const { field, filter } = await settled(source, incoming);
    const matched = new Uint8Array(items.count);
    const removals = await compareHere(source, incoming, { field, filter, matched, entries });
    let i = 0;
    for await (const right of items.lines()) if (matched[i++] === 0) entries.append(JSON.stringify({ diffType: 'DIFF_TYPE_NEW', right }));
    entries.flush();
    return { compareField: field, count: entries.count, removals, entries: () => entries.lines() as AsyncIterable<DiffEntry>, close };
  } catch (error) {
    close();
    throw error;
  }
}

type Compare = { field: string; filter: FilterItem[]; matched: Uint8Array; entries: Spool };

/** CHANGE and REMOVE entries, in the order of the records here; a 400 when the compare field does
 * not identify one record here. Answers how many are REMOVE. */
async function compareHere(source: ImportSource, incoming: Incoming, { field, filter, matched, entries }: Compare): Promise<number> {
  let removals = 0;
  const checkUnique = field !== 'id' && field !== 'code';
  const seen = new KeyIndex();
  const problems: string[] = [];
  const def = source.def;
  for await (const left of source.here(filter)) {
    const key = keyOf(left, field);
    const at = key === undefined ? undefined : incoming.find(key, field);
    if (key === undefined || (at !== undefined && matched[at] === 1)) {
      problems.push(
        `${def.path} ${String(left.id)}: ${key === undefined ? `no ${field}` : `${field} ${key} is held by another record too`}`,
      );
    } else if (at === undefined) {
      if (checkUnique) {
        // A repeated hash among records only here is checked against the read model (a collision is not a repeat).
        const hash = KeyIndex.hash(key);
        if (!seen.candidates(hash).next().done && (await source.heldTwice(field, key)))
          problems.push(`${def.path} ${String(left.id)}: ${field} ${key} is held by another record too`);
        seen.add(hash, 0);
      }
      entries.append(JSON.stringify({ diffType: 'DIFF_TYPE_REMOVE', left }));
      removals++;
    } else {
      matched[at] = 1;
      const right = incoming.items.read(at);
      if (!sameRecord(def, left, right, field)) entries.append(JSON.stringify({ diffType: 'DIFF_TYPE_CHANGE', left, right }));
    }
    if (problems.length >= MAX_PROBLEMS) break;
  }
  if (problems.length > 0) throw notUnique('here', field, problems);
  return removals;
}

/** Whether a process runs with this pid (one of another user's counts: EPERM). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Deletes the import folders left by processes that ended during an import (killed, crashed):
 * those whose pid runs no process, and this process's own pid's from before it started (a
 * restarted container's service has the same pid). A folder of a process still running is kept,
 * however old: several services, or test workers, share one temporary folder, and an import may
 * take long. (A pid reused by an unrelated process keeps a dead folder until a later start.)
 * The folder's mtime is when its files were created: they are only appended to afterwards.
 * Returns the folders deleted; one that cannot be read or deleted is left for the next start.
 */
export async function sweepStaleImports(root = tmpdir(), started = performance.timeOrigin): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(root).catch(() => [])) {
    const pid = Number(IMPORT_FOLDER.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isSafeInteger(pid)) continue;
    const path = join(root, name);
    try {
      const stale = pid === process.pid ? (await stat(path)).mtimeMs < started : !running(pid);
      if (!stale) continue;
      await rm(path, { recursive: true, force: true });
      removed.push(path);
    } catch {
      // Gone meanwhile, or not ours to delete.
    }
  }
  return removed;
}
