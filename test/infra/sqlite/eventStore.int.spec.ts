import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { openSqliteEventStore, type SqliteEventStore } from '../../../infra/sqlite/eventStore.ts';
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

describe('SQLite event log', () => {
  it('group-commits appends that arrive together and keeps them after reopening', async () => {
    const path = join(dir, `group-${randomUUID()}.db`);
    const store = openSqliteEventStore(path);
    const streams = Array.from({ length: 200 }, () => `g-${randomUUID()}`);
    const results = await Promise.all(
      streams.map((stream) =>
        store.append({ stream, expected: 'no_stream', events: [{ id: randomUUID(), type: 'G', schemaVersion: 1, data: {}, metadata: { actor: 'a', at: new Date().toISOString() } }] }),
      ),
    );
    expect(new Set(results.map((r) => r.position)).size).toBe(200);
    await store.close();
    const again = openSqliteEventStore(path);
    expect(await again.readAll({ after: 0n, limit: 1000 })).toHaveLength(200);
    await again.close();
  });
});
