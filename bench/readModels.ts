// `npm run bench:read-models`: the read-model figures of DESIGN.md's performance budget on the
// embedded store, over N registry-shaped records (default 1,000,000; `--records N`), each figure
// against a raw baseline measured in the same run:
//
//   rebuild   N creates, N/10 patches and N/100 deletes folded in memory by the registry's own
//             projection, then SqliteReadStore.bulkLoad (indexes and trigram indexes built after
//             the load); baseline: a raw node:sqlite bulk insert of the same documents into a table
//             of the same shape with only its primary key, in transactions of the same size.
//   queries   store time of find / count / autocomplete through the store's API (the promise, JSON
//             parsing included), the median of `--runs` runs, each run right after its baseline:
//             a raw primary-key page of 20 documents (parsed) for pages and autocomplete, a raw
//             count of the same number of primary keys for counts.
//
// The store and the baseline's table live in a temporary folder, removed at the end.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import type { Page, RecordedEvent, VersionedDocument } from '../domain/ports.ts';
import { codedValue } from '../modules/registries/domain/codedValue.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../domain/resource/defineResource.ts';
import { FilteringSchema, toQuery, type Query } from '../domain/shared/filtering.ts';
import { streamName } from '../domain/shared/streams.ts';
import { openSqliteReadStore, type SqliteReadStore } from '../infra/sqlite/readStore.ts';
import { resourceProjection } from '../projections/resourceProjection.ts';
import { foldOne } from '../workers/readModelJobs.ts';

const { values: flags } = parseArgs({
  options: { records: { type: 'string', default: '1000000' }, runs: { type: 'string', default: '101' } },
});
const RECORDS = Math.round(Number(flags.records));
const RUNS = Math.max(5, Math.round(Number(flags.runs)));
if (!(RECORDS >= 1000)) throw new Error(`--records must be at least 1000, got "${flags.records}"`);

/** A registry like the service's own, with a number besides its dates; indexed as they are. */
const item = defineRegistry({
  name: 'BenchItem',
  events: { BenchItemCreated: created(), BenchItemReplaced: replaced(), BenchItemPatched: patched(), BenchItemDeleted: deleted() },
  path: 'bench-items',
  fields: codedValue({ amount: z.int().min(0) }),
  indexed: ['amount'],
});
const projection = resourceProjection(item);
const COLLECTION = projection.collection;
const PAGE: Page = { offset: 0, limit: 20 };
const LOAD_CHUNK = 50_000;

const WORDS = [
  'Alpha',
  'Bravo',
  'Charlie',
  'Delta',
  'Echo',
  'Foxtrot',
  'Golf',
  'Hotel',
  'India',
  'Juliet',
  'Kilo',
  'Lima',
  'Mike',
  'November',
  'Oscar',
  'Papa',
  'Quebec',
  'Romeo',
  'Sierra',
  'Tango',
  'Uniform',
  'Victor',
  'Whiskey',
  'Xray',
  'Yankee',
  'Zulu',
  'Falcon',
  'Quartz',
  'Ember',
  'Harbor',
  'Granite',
  'Willow',
  'Copper',
  'Meadow',
  'Summit',
  'Cobalt',
  'Saffron',
  'Thistle',
  'Lantern',
  'Orchid',
  'Pebble',
  'Raven',
  'Sable',
  'Tundra',
  'Umber',
  'Vessel',
  'Walnut',
  'Zephyr',
  'Beacon',
  'Cedar',
  'Dune',
  'Fjord',
  'Glacier',
  'Heron',
  'Iris',
  'Jasper',
  'Kestrel',
  'Lagoon',
  'Marble',
  'Nimbus',
];

/** A small deterministic generator (mulberry32), so every run asks the same questions. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const word = (n: number): string => WORDS[n % WORDS.length] ?? 'Alpha';
const codeOf = (i: number): string => `BI-${String(i).padStart(7, '0')}`;
const nameOf = (i: number): string => `${word(i)} ${word(Math.floor(i / WORDS.length))} ${String(i % 9973)}`;
const DAY = 86_400_000;
const EPOCH = Date.UTC(2020, 0, 1);

// ---------------------------------------------------------------------------------------------
// The log, folded in memory

function* events(ids: readonly string[]): Generator<RecordedEvent> {
  let position = 0n;
  const event = (i: number, revision: number, type: string, data: Record<string, unknown>): RecordedEvent => {
    position += 1n;
    const at = new Date(EPOCH + Number(position) * 1000).toISOString();
    return {
      id: randomUUID(),
      stream: streamName(item.category, ids[i] ?? ''),
      revision,
      position,
      type,
      schemaVersion: 1,
      data,
      metadata: { actor: 'bench', at },
    };
  };
  for (let i = 0; i < ids.length; i++) {
    const validityFrom = new Date(EPOCH + ((i * 7919) % 2000) * DAY).toISOString();
    yield event(i, 0, 'BenchItemCreated', {
      id: ids[i],
      code: codeOf(i),
      name: nameOf(i),
      validityFrom,
      amount: (i * 104_729) % 100_000,
      description: 'A record of the read-model benchmark',
    });
  }
  for (let i = 0; i < ids.length; i += 10) yield event(i, 1, 'BenchItemPatched', { patch: { name: `${nameOf(i)} renamed` } });
  for (let i = 0; i < ids.length; i += 100) yield event(i, 2, 'BenchItemDeleted', {});
}

type Folded = { documents: Map<string, VersionedDocument>; events: number; checkpoint: bigint };

/** The rebuild's first half: every event through the projection's own evolve, in memory, as the
 * recreate job folds it (workers/readModelJobs.ts). */
function fold(log: readonly RecordedEvent[]): Folded {
  const documents = new Map<string, VersionedDocument>();
  let count = 0;
  let checkpoint = 0n;
  for (const e of log) {
    count += 1;
    checkpoint = e.position;
    foldOne(projection, documents, e, (_event, error) => {
      throw error;
    });
  }
  return { documents, events: count, checkpoint };
}

// ---------------------------------------------------------------------------------------------
// Rebuild

const seconds = (start: number): number => (performance.now() - start) / 1000;

/** Baseline: the same documents into a bare table of the same shape, primary key only. */
function rawInsert(path: string, documents: Iterable<VersionedDocument>): number {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -262144');
  db.exec('CREATE TABLE raw (id TEXT PRIMARY KEY, version INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, doc BLOB)');
  const insert = db.prepare('INSERT INTO raw (id, version, deleted, doc) VALUES (?, ?, ?, jsonb(?))');
  const start = performance.now();
  let n = 0;
  db.exec('BEGIN');
  for (const d of documents) {
    insert.run(d.id, d.version, d.doc === null ? 1 : 0, d.doc === null ? null : JSON.stringify(d.doc));
    if (++n % LOAD_CHUNK === 0) {
      db.exec('COMMIT');
      db.exec('BEGIN');
    }
  }
  db.exec('COMMIT');
  const took = seconds(start);
  db.close();
  return took;
}

/** The events are made before the clock starts: they stand for the log, whose reading is not
 * measured here; they are garbage once folded. */
function timedFold(ids: readonly string[]): { folded: Folded; foldSeconds: number } {
  const log = [...events(ids)];
  const start = performance.now();
  const folded = fold(log);
  return { folded, foldSeconds: seconds(start) };
}

type Rebuild = { events: number; documents: number; foldSeconds: number; loadSeconds: number; rawSeconds: number; ids: string[] };

async function rebuild(dir: string, store: SqliteReadStore): Promise<Rebuild> {
  const ids = Array.from({ length: RECORDS }, () => randomUUID());
  const { folded, foldSeconds } = timedFold(ids);
  console.log(`  folded ${fmt(folded.events)} events into ${fmt(folded.documents.size)} documents in ${foldSeconds.toFixed(1)} s`);
  const rawSeconds = rawInsert(join(dir, 'raw.db'), folded.documents.values());
  rmSync(join(dir, 'raw.db'), { force: true });
  console.log(`  baseline: raw insert of the same documents in ${rawSeconds.toFixed(1)} s`);
  await store.ensureCollection(COLLECTION, projection.indexedPaths, { textPaths: projection.textPaths ?? [] });
  const start = performance.now();
  await store.bulkLoad(COLLECTION, folded.documents.values(), folded.checkpoint);
  const loadSeconds = seconds(start);
  console.log(`  store: bulk load with indexes built after it in ${loadSeconds.toFixed(1)} s`);
  return { events: folded.events, documents: folded.documents.size, foldSeconds, loadSeconds, rawSeconds, ids };
}

// ---------------------------------------------------------------------------------------------
// Queries

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const ms = (n: number): string => `${n < 1 ? n.toFixed(3) : n.toFixed(2)} ms`;
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
};

const query = (body: unknown): Query => toQuery(FilteringSchema.parse(body), item.columns, item.defaultSort);
const where = (column: string, operator: string, value: string | number): Query => query({ filter: [{ column, operator, value }] });

type Side = () => Promise<unknown>;
/** One figure: what each run asks (and its query, to report how many documents it matches). */
type Figure = {
  name: string;
  goal: string;
  limitMs: number;
  baseline: 'page' | 'count';
  run: (run: number) => { side: Side; query?: Query };
};
type Timed = { baseMs: number; measuredMs: number; ratio: number };

async function timed(side: Side): Promise<number> {
  const start = performance.now();
  await side();
  return performance.now() - start;
}

/** RUNS rounds of baseline then measured, after a few unmeasured ones. */
async function measure(base: (run: number) => Side, measured: (run: number) => Side): Promise<Timed> {
  for (let run = 0; run < 5; run++) {
    await base(run)();
    await measured(run)();
  }
  const b: number[] = [];
  const m: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    b.push(await timed(base(run)));
    m.push(await timed(measured(run)));
  }
  return { baseMs: median(b), measuredMs: median(m), ratio: median(m.map((y, i) => y / (b[i] ?? NaN))) };
}

type Raw = { page: (run: number) => Side; count: Side; fullScanCount: (term: string) => number };

/** Raw statements on a second connection to the store's file. */
function rawBaselines(path: string, sortedIds: readonly string[]): Raw & { close: () => void } {
  const db = new DatabaseSync(path, { readOnly: true });
  db.exec('PRAGMA mmap_size = 1073741824; PRAGMA cache_size = -65536');
  const table = `"rm_${COLLECTION}"`;
  const page = db.prepare(`SELECT json(doc) AS doc FROM ${table} WHERE id > ? ORDER BY id LIMIT 20`);
  const tenth = sortedIds[Math.floor(sortedIds.length / 10)] ?? '';
  const count = db.prepare(`SELECT count(*) AS n FROM ${table} WHERE id < ?`);
  const scan = db.prepare(`SELECT count(*) AS n FROM ${table} WHERE deleted = 0 AND json_extract(doc, '$.name') LIKE ? ESCAPE '\\'`);
  const pick = random(11);
  return {
    page: () => {
      const after = sortedIds[Math.floor(pick() * sortedIds.length)] ?? '';
      return () => Promise.resolve(page.all(after).map((row) => JSON.parse(String(row.doc)) as unknown));
    },
    count: () => Promise.resolve(count.get(tenth)),
    fullScanCount: (term) => {
      const start = performance.now();
      scan.get(`%${term}%`);
      return performance.now() - start;
    },
    close: () => {
      db.close();
    },
  };
}

/** The questions, each run with its own parameters from a fixed sequence. */
function figures(store: SqliteReadStore): Figure[] {
  const at =
    (seed: number) =>
    (run: number): number =>
      Math.floor(random(seed + run)() * RECORDS);
  const find = (q: Query) => ({ side: () => store.find(COLLECTION, q, PAGE), query: q });
  const count = (q: Query) => ({ side: () => store.count(COLLECTION, q), query: q });
  const lower = (s: string): string => s.toLowerCase();
  const pair = (i: number): [string, string] => [word(i), word(Math.floor(i / WORDS.length))];
  const contains = (i: number): Query => {
    const [a, b] = pair(i);
    return where('name', 'LIKE', `%${lower(a.slice(-3))} ${lower(b.slice(0, 4))}%`);
  };
  const digits = (i: number): string => codeOf(i).slice(3, 8);
  return [
    {
      name: 'filter code EQ, page of 20',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: (r) => find(where('code', 'EQ', codeOf(at(1)(r)))),
    },
    {
      name: 'filter name EQ, sorted by code, page of 20',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: (r) => find(where('name', 'EQ', nameOf(at(2)(r)))),
    },
    {
      name: 'filter amount GTE, sorted by amount DESC, page of 20',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: (r) =>
        find(
          query({
            filter: [{ column: 'amount', operator: 'GTE', value: at(3)(r) % 100_000 }],
            sort: [{ column: 'amount', order: 'DESC' }],
          }),
        ),
    },
    {
      name: 'filter amount LT 10%, sorted by code, page of 20',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: () => find(where('amount', 'LT', 10_000)),
    },
    {
      name: 'count amount LT, 10% of the records',
      goal: '< 10 ms',
      limitMs: 10,
      baseline: 'count',
      run: (r) => count(where('amount', 'LT', 10_000 + (r % 7))),
    },
    {
      name: 'LIKE contains on name (trigram index), page of 20',
      goal: '< 10 ms',
      limitMs: 10,
      baseline: 'page',
      run: (r) => find(contains(at(4)(r))),
    },
    {
      name: 'LIKE contains on name (trigram index), count',
      goal: '< 10 ms',
      limitMs: 10,
      baseline: 'count',
      run: (r) => count(contains(at(4)(r))),
    },
    {
      name: 'LIKE prefix on code (`bi-01234%`), page of 20',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: (r) => find(where('code', 'LIKE', `bi-${digits(at(5)(r))}%`)),
    },
    {
      name: 'LIKE prefix on name (`falcon qua%`), page of 20',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: (r) => {
        const [a, b] = pair(at(6)(r));
        return find(where('name', 'LIKE', `${lower(a)} ${lower(b.slice(0, 3))}%`));
      },
    },
    {
      name: 'autocomplete code and name, 4 letters, 10 values',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: (r) => ({ side: () => store.autocomplete(COLLECTION, ['code', 'name'], lower(word(at(7)(r)).slice(0, 4)), 10) }),
    },
    {
      name: 'autocomplete code and name, `bi-0123`, 10 values',
      goal: '< 1 ms',
      limitMs: 1,
      baseline: 'page',
      run: (r) => ({ side: () => store.autocomplete(COLLECTION, ['code', 'name'], `bi-${digits(at(8)(r)).slice(0, 4)}`, 10) }),
    },
  ];
}

type Row = [figure: string, baseline: string, measured: string, ratio: string, goal: string, met: boolean];

/** How many documents a figure's queries match, the median of its first few. */
async function matches(store: SqliteReadStore, figure: Figure): Promise<string> {
  const counts: number[] = [];
  for (let run = 0; run < 5; run++) {
    const q = figure.run(run).query;
    if (q !== undefined) counts.push(await store.count(COLLECTION, q));
  }
  if (counts.length === 0) return '';
  const n = median(counts);
  return ` (~${fmt(n)} matches, ${((100 * n) / RECORDS).toPrecision(2)}%)`;
}

async function queryRows(store: SqliteReadStore, raw: Raw): Promise<Row[]> {
  const rows: Row[] = [];
  for (const figure of figures(store)) {
    const base = figure.baseline === 'page' ? raw.page : () => raw.count;
    const t = await measure(base, (run) => figure.run(run).side);
    const name = `${figure.name}${await matches(store, figure)}`;
    const baseline = figure.baseline === 'page' ? 'primary-key page of 20' : 'count of 10% of the primary keys';
    console.log(`  ${name}: ${ms(t.measuredMs)} (baseline ${ms(t.baseMs)})`);
    rows.push([
      name,
      `${baseline}: ${ms(t.baseMs)}`,
      ms(t.measuredMs),
      `${t.ratio.toFixed(1)}x`,
      figure.goal,
      t.measuredMs < figure.limitMs,
    ]);
  }
  return rows;
}

function rebuildRow(r: Rebuild): Row {
  const rate = r.events / (r.foldSeconds + r.loadSeconds);
  const base = r.events / r.rawSeconds;
  return [
    `rebuild: fold ${fmt(r.events)} events in memory, bulk load ${fmt(r.documents)} documents, build indexes`,
    `raw insert of the same documents: ${fmt(base)} events/s (${r.rawSeconds.toFixed(1)} s)`,
    `${fmt(rate)} events/s (${(r.foldSeconds + r.loadSeconds).toFixed(1)} s)`,
    `${String(Math.floor((100 * rate) / base))}%`,
    '≥ 50,000 events/s',
    rate >= 50_000,
  ];
}

function table(rows: readonly Row[]): string {
  const lines = rows.map(([f, b, m, r, g, ok]) => `| ${f} | ${b} | ${m} | ${r} | ${g} | ${ok ? 'yes' : 'NO'} |`);
  return ['| figure | baseline (raw, same run) | measured | ratio | goal | met? |', '|---|---|---|---|---|---|', ...lines].join('\n');
}

async function main(): Promise<void> {
  const cpu = cpus();
  console.log(
    `Node ${process.version}, ${String(cpu.length)} x ${cpu[0]?.model ?? 'unknown CPU'}, ${fmt(RECORDS)} records, ${String(RUNS)} runs per figure\n`,
  );
  const started = performance.now();
  const dir = mkdtempSync(join(tmpdir(), 'bench-read-models-'));
  const path = join(dir, 'read-models.db');
  const store = openSqliteReadStore({ path });
  try {
    console.log('Rebuild:');
    const r = await rebuild(dir, store);
    const split = `fold ${r.foldSeconds.toFixed(1)} s, bulk load ${r.loadSeconds.toFixed(1)} s (about ${(r.loadSeconds - r.rawSeconds).toFixed(1)} s more than the raw insert: the indexes)`;
    console.log(`  ${split}\nQueries:`);
    const raw = rawBaselines(path, r.ids.sort());
    try {
      const rows = [rebuildRow(r), ...(await queryRows(store, raw))];
      const scanMs = median([0, 1, 2].map(() => raw.fullScanCount('con qua')));
      console.log(`\n${table(rows)}\n`);
      console.log(`Rebuild: ${split}.`);
      console.log(`For comparison, the LIKE contains count read through every document (no trigram index): ${ms(scanMs)}.`);
    } finally {
      raw.close();
    }
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`(${seconds(started).toFixed(0)} s in all)`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
});
