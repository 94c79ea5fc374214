import { mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, describe, expect, it } from 'vitest';
import { EVENT_LOG_PRAGMAS, EVENT_LOG_SCHEMA, openSqliteEventStore, type SqliteEventStore } from '../../../infra/sqlite/eventStore.ts';
import { eventStoreContract } from '../../support/eventStoreContract.ts';

const dir = mkdtempSync(join(tmpdir(), 'events-'));
const opened: SqliteEventStore[] = [];
const open = () => {
  const s = openSqliteEventStore(join(dir, 'events.db'));
  opened.push(s);
  return s;
};
afterAll(async () => {
  for (const s of opened) await s.close();
});

eventStoreContract('SQLite', open);

// In memory (the CLI's, the unit specs'): its writes stay on its one connection, since the writer
// thread's own connection to ':memory:' would be another, empty database.
const memory = openSqliteEventStore(':memory:');
opened.push(memory);
eventStoreContract('SQLite in memory', () => Promise.resolve(memory));

describe('SQLite event log', () => {
  it('group-commits appends that arrive together and keeps them after reopening', async () => {
    const path = join(dir, `group-${randomUUID()}.db`);
    const store = openSqliteEventStore(path);
    const streams = Array.from({ length: 200 }, () => `g-${randomUUID()}`);
    const results = await Promise.all(
      streams.map((stream) =>
        store.append({
          stream,
          expected: 'no_stream',
          events: [{ id: randomUUID(), type: 'G', schemaVersion: 1, data: {}, metadata: { actor: 'a', at: new Date().toISOString() } }],
        }),
      ),
    );
    expect(new Set(results.map((r) => r.position)).size).toBe(200);
    await store.close();
    const again = openSqliteEventStore(path);
    expect(await again.readAll({ after: 0n, limit: 1000 })).toHaveLength(200);
    await again.close();
  });

  const event = () => ({ id: randomUUID(), type: 'G', schemaVersion: 1, data: {}, metadata: { actor: 'a', at: new Date().toISOString() } });

  it('refuses alone, writing nothing of it, an append the group commit cannot take whole', async () => {
    const store = openSqliteEventStore(join(dir, `alone-${randomUUID()}.db`));
    const taken = event();
    await store.append({ stream: `g-${randomUUID()}`, expected: 'no_stream', events: [taken] });
    const kept = `g-${randomUUID()}`;
    const broken = `g-${randomUUID()}`;
    const unserializable = `g-${randomUUID()}`;
    const outcomes = await store.appendMany([
      { stream: kept, expected: 'no_stream', events: [event()] },
      // Its second event's id is another stream's: its first would be written before that insert failed.
      { stream: broken, expected: 'no_stream', events: [event(), taken], claim: [{ scope: 'g', code: 'B' }] },
      { stream: unserializable, expected: 'no_stream', events: [{ ...event(), data: { n: 1n } }] },
      { stream: `g-${randomUUID()}`, expected: 'no_stream', events: [event()], claim: [{ scope: 'g', code: 'B' }] },
    ]);
    expect(outcomes.map((o) => o.ok)).toEqual([true, false, false, true]);
    expect(await store.readStream(broken)).toEqual([]);
    expect(await store.readStream(unserializable)).toEqual([]);
    expect(await store.readStream(kept)).toHaveLength(1);
    await store.close();
  });

  it('never hands out a position again, even after the newest events are deleted', async () => {
    const path = join(dir, `reuse-${randomUUID()}.db`);
    const store = openSqliteEventStore(path);
    await store.append({ stream: `g-${randomUUID()}`, expected: 'no_stream', events: [event()] });
    const newest = await store.append({ stream: `g-${randomUUID()}`, expected: 'no_stream', events: [event()] });
    const raw = new DatabaseSync(path);
    raw.prepare('DELETE FROM events WHERE position = ?').run(newest.position);
    raw.close();
    const next = await store.append({ stream: `g-${randomUUID()}`, expected: 'no_stream', events: [event()] });
    expect(next.position).toBe(newest.position + 1n);
    await store.close();
  });

  it('gives purged pages back to the file system, a new log incrementally, an older one after one full VACUUM', async () => {
    const size = (path: string) => [path, `${path}-wal`].reduce((n, f) => n + (statSync(f, { throwIfNoEntry: false })?.size ?? 0), 0);
    const fill = async (store: SqliteEventStore): Promise<string[]> => {
      const streams = Array.from({ length: 400 }, () => `big-${randomUUID()}`);
      await Promise.all(
        streams.map((stream) =>
          store.append({ stream, expected: 'no_stream', events: [{ ...event(), data: { text: 'x'.repeat(4000) } }] }),
        ),
      );
      return streams;
    };
    const autoVacuum = (path: string) => {
      const db = new DatabaseSync(path);
      const mode = (db.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number }).auto_vacuum;
      db.close();
      return mode;
    };
    // A log made before auto_vacuum was set: SQLite's default, NONE.
    const oldPath = join(dir, `novacuum-${randomUUID()}.db`);
    const raw = new DatabaseSync(oldPath);
    raw.exec(EVENT_LOG_PRAGMAS);
    raw.exec(EVENT_LOG_SCHEMA);
    raw.close();
    for (const [path, modeAtOpen] of [
      [join(dir, `vacuum-${randomUUID()}.db`), 2],
      [oldPath, 0],
    ] as const) {
      const store = openSqliteEventStore(path);
      expect(autoVacuum(path)).toBe(modeAtOpen);
      const streams = await fill(store);
      const keptStream = `kept-${randomUUID()}`;
      await store.append({ stream: keptStream, expected: 'no_stream', events: [event()] });
      const before = size(path);
      expect(await store.purge(streams.slice(0, 380))).toBe(380);
      const after = size(path);
      expect(after, path).toBeLessThan(before - 380 * 4000 * 0.8);
      expect(await store.readStream(keptStream)).toHaveLength(1);
      expect(await store.readStream(streams[0] ?? '')).toEqual([]);
      expect(await store.readAll({ after: 0n, limit: 1000 })).toHaveLength(21);
      await store.close();
      expect(autoVacuum(path)).toBe(2);
    }
  });

  it('rebuilds a log made before positions were AUTOINCREMENT, keeping every position', async () => {
    const path = join(dir, `old-${randomUUID()}.db`);
    const raw = new DatabaseSync(path);
    raw.exec(`CREATE TABLE events (position INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, stream TEXT NOT NULL, category TEXT NOT NULL,
      revision INTEGER NOT NULL, type TEXT NOT NULL, schema_version INTEGER NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL,
      UNIQUE (stream, revision));
      CREATE INDEX events_by_category ON events (category, position);`);
    const insert = raw.prepare('INSERT INTO events VALUES (?, ?, ?, ?, 0, ?, 1, ?, ?)');
    for (const position of [1, 2, 5])
      insert.run(position, randomUUID(), `old-${String(position)}`, 'old', 'G', '{}', JSON.stringify({ actor: 'a', at: 't' }));
    raw.close();
    const store = openSqliteEventStore(path);
    expect((await store.readAll({ after: 0n, limit: 10 })).map((e) => e.position)).toEqual([1n, 2n, 5n]);
    // Nothing deleted events before this change, so what the old table holds is all it handed out.
    const next = await store.append({ stream: `old-${randomUUID()}`, expected: 'no_stream', events: [event()] });
    expect(next.position).toBe(6n);
    const newest = await store.append({ stream: `old-${randomUUID()}`, expected: 'no_stream', events: [event()] });
    const del = new DatabaseSync(path);
    del.prepare('DELETE FROM events WHERE position = ?').run(newest.position);
    del.close();
    expect((await store.append({ stream: `old-${randomUUID()}`, expected: 'no_stream', events: [event()] })).position).toBe(8n);
    await store.close();
    const check = new DatabaseSync(path);
    expect((check.prepare("SELECT sql FROM sqlite_master WHERE name = 'events'").get() as { sql: string }).sql).toMatch(/AUTOINCREMENT/);
    expect(check.prepare("SELECT name FROM sqlite_master WHERE name = 'events_by_category'").get()).toBeDefined();
    check.close();
  });
});
