// Figure 3 of `npm run bench` (bench/http.ts): batched append of 100 events. Baseline C is raw
// node:sqlite, 100 INSERTs per transaction; measured is SqliteEventStore.append of 100 events per
// call, one caller and four concurrent, in this process.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { NewEvent } from '../domain/ports.ts';
import { SqliteEventStore } from '../infra/sqlite/eventStore.ts';
import { LOG_PRAGMAS, RAW_SCHEMA } from './common.ts';
import { flushDisk, fmt, median, pct, runTag, type Row } from './httpSupport.ts';

const BATCH = 100;
const CONCURRENT_APPENDERS = 4;

type Sample = { id: string; data: Record<string, unknown>; metadata: NewEvent['metadata'] };

const sampleEvent = (i: number): Sample => ({
  id: randomUUID(),
  data: { code: `EV-${runTag}-${String(i)}`, name: 'Bench event', description: 'One of a batch of a hundred', registry: {} },
  metadata: { actor: 'bench', at: new Date().toISOString(), requestId: `req-${String(i)}` },
});

/** Writes batches back to back for `seconds`; answers events per second. */
type Writer = { name: string; run: (seconds: number) => Promise<number>; close: () => Promise<void> };

/** `callers` loops of `step` (each writing one batch) run concurrently for `seconds`. */
async function eventsPerSecond(seconds: number, callers: number, step: () => void | Promise<void>): Promise<number> {
  const start = performance.now();
  const end = start + seconds * 1000;
  let batches = 0;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      await step();
      batches++;
    }
  };
  await Promise.all(Array.from({ length: callers }, loop));
  return (batches * BATCH) / ((performance.now() - start) / 1000);
}

function rawWriter(dir: string): Writer {
  const db = new DatabaseSync(join(dir, 'raw.db'));
  db.exec(LOG_PRAGMAS);
  db.exec(RAW_SCHEMA);
  const insert = db.prepare(
    'INSERT INTO events (id, stream, category, revision, type, schema_version, data, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  );
  let n = 0;
  const batch = (): void => {
    const stream = `benchevent-${randomUUID()}`;
    db.exec('BEGIN IMMEDIATE');
    for (let revision = 0; revision < BATCH; revision++) {
      const e = sampleEvent(n++);
      insert.run(e.id, stream, 'benchevent', revision, 'BenchEvent', 1, JSON.stringify(e.data), JSON.stringify(e.metadata));
    }
    db.exec('COMMIT');
  };
  return {
    name: 'C raw',
    run: (seconds) => eventsPerSecond(seconds, 1, batch),
    close: () => {
      db.close();
      return Promise.resolve();
    },
  };
}

function storeWriter(dir: string, callers: number): Writer {
  const store = new SqliteEventStore(join(dir, `store-${String(callers)}.db`));
  let n = 0;
  // Appends of one event-loop turn share a transaction: with several callers, group commit.
  const append = async (): Promise<void> => {
    const events: NewEvent[] = [];
    for (let i = 0; i < BATCH; i++) events.push({ ...sampleEvent(n++), type: 'BenchEvent', schemaVersion: 1 });
    await store.append({ stream: `benchevent-${randomUUID()}`, expected: 'no_stream', events });
  };
  return { name: `store x${String(callers)}`, run: (seconds) => eventsPerSecond(seconds, callers, append), close: () => store.close() };
}

/** Each the median of the rounds; ratios the median of the rounds' ratios to C. */
export type AppendFigures = { c: number; sequential: number; concurrent: number; sequentialRatio: number; concurrentRatio: number };

/** `seconds` per side in all, split over `rounds`. */
export async function appendFigures(o: { rounds: number; seconds: number }): Promise<AppendFigures> {
  const segment = o.seconds / o.rounds;
  console.log(
    `Batched append: ${String(BATCH)} events per transaction or call, ${String(o.rounds)} rounds of ${segment.toFixed(2)} s per side`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'admin-bench-append-'));
  const writers = [rawWriter(dir), storeWriter(dir, 1), storeWriter(dir, CONCURRENT_APPENDERS)];
  try {
    for (const w of writers) await w.run(1);
    const rounds: number[][] = [];
    for (let round = 1; round <= o.rounds; round++) {
      const rates: number[] = [];
      for (const w of writers) {
        flushDisk();
        rates.push(await w.run(segment));
      }
      rounds.push(rates);
      console.log(`  round ${String(round)}: ${writers.map((w, i) => `${w.name} ${fmt(rates[i] ?? NaN)} events/s`).join(' | ')}`);
    }
    const col = (i: number): number[] => rounds.map((r) => r[i] ?? NaN);
    const ratio = (i: number): number => median(rounds.map((r) => (r[i] ?? NaN) / (r[0] ?? NaN)));
    return {
      c: median(col(0)),
      sequential: median(col(1)),
      concurrent: median(col(2)),
      sequentialRatio: ratio(1),
      concurrentRatio: ratio(2),
    };
  } finally {
    for (const w of writers) await w.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

export function appendRows(s: AppendFigures): Row[] {
  return [
    [
      `append ${String(BATCH)} events, 1 caller`,
      `${fmt(s.c)} ev/s (C)`,
      `${fmt(s.sequential)} ev/s`,
      pct(s.sequentialRatio),
      '≥ 60%',
      s.sequentialRatio >= 0.6,
    ],
    [
      `append ${String(BATCH)} events, ${String(CONCURRENT_APPENDERS)} callers`,
      `${fmt(s.c)} ev/s (C)`,
      `${fmt(s.concurrent)} ev/s`,
      pct(s.concurrentRatio),
      '≥ 60%',
      s.concurrentRatio >= 0.6,
    ],
  ];
}
