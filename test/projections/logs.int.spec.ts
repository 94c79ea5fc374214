// The logs' projection folds a deletion by filter the same way whatever the batches: all events in
// one batch (creates, a replace and the deletion together, so the deletion's selection reads both
// the store and the batch), one event per batch (the selection reads the store only), and a fold
// in memory as a rebuild makes it. Logs last written after the deletion's position are kept.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { log, logDeletion } from '../../modules/logs/domain/log.ts';
import type { EventStore, NewEvent, Position, VersionedDocument } from '../../domain/ports.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { logsProjection } from '../../modules/logs/projections/logs.ts';
import { Projector } from '../../workers/projector.ts';
import { foldOne } from '../../workers/readModelJobs.ts';

const event = (type: string, data: Record<string, unknown>): NewEvent => ({
  id: randomUUID(),
  type,
  schemaVersion: 1,
  data,
  metadata: { actor: 'tester', at: '2026-11-01T00:00:00.000Z' },
});

const fields = (ownerId: string, startDate: string, response = 'ok') => ({
  ownerType: 'TICKET',
  ownerId,
  logTypeCode: 'HTTP',
  startDate,
  endDate: startDate,
  request: 'GET',
  response,
  correlationId: 'c',
  duration: 0,
});

/** Writes the scenario; answers the ids that the deletion must remove. */
async function scenario(store: EventStore): Promise<{ gone: string[]; kept: string[] }> {
  const gone: string[] = [];
  const kept: string[] = [];
  const create = async (f: Record<string, unknown>): Promise<{ id: string; position: Position }> => {
    const id = randomUUID();
    const r = await store.append({
      stream: `${log.category}-${id}`,
      expected: 'no_stream',
      events: [event(log.createdEvent, { id, ...f })],
    });
    return { id, position: r.position };
  };
  for (let i = 0; i < 5; i++) gone.push((await create(fields('T-1', '2026-10-01T00:00:00.000Z'))).id);
  kept.push((await create(fields('T-1', '2026-10-30T00:00:00.000Z'))).id); // not older than
  kept.push((await create(fields('T-2', '2026-10-01T00:00:00.000Z'))).id); // another owner
  const replaced = await create(fields('T-1', '2026-10-01T00:00:00.000Z'));
  gone.push(replaced.id);
  await store.append({
    stream: `${log.category}-${replaced.id}`,
    expected: 0,
    events: [event(`${log.name}Replaced`, fields('T-1', '2026-10-02T00:00:00.000Z', 'again'))],
  });
  const upTo = await store.headPosition();
  // Written after the deletion's position: kept though they match.
  kept.push((await create(fields('T-1', '2026-10-01T00:00:00.000Z'))).id);
  const id = randomUUID();
  await store.append({
    stream: `${logDeletion.category}-${id}`,
    expected: 'no_stream',
    events: [
      event(logDeletion.createdEvent, {
        id,
        logTypeCode: 'HTTP',
        olderThan: '2026-10-15T00:00:00.000Z',
        ownerType: 'TICKET',
        ownerId: 'T-1',
        upTo: upTo.toString(),
        deleted: 6,
        deletedIds: [],
      }),
    ],
  });
  kept.push((await create(fields('T-1', '2026-10-01T00:00:00.000Z'))).id);
  return { gone, kept };
}

async function live(batchSize: number): Promise<Map<string, VersionedDocument>> {
  const dir = mkdtempSync(join(tmpdir(), 'logs-projection-'));
  const stores = openEmbeddedStores(dir);
  try {
    await scenario(stores.eventStore);
    const projector = new Projector(logsProjection(), stores.eventStore, stores.readStore, { batchSize });
    await projector.start();
    expect(await projector.waitFor(await stores.eventStore.headPosition(), 10_000)).toBe(true);
    await projector.stop();
    const scanned = await stores.readStore.scan(log.collection, { limit: 100 });
    return new Map(scanned.map((d) => [d.id, { id: d.id, version: 0, doc: d }]));
  } finally {
    await stores.eventStore.close();
    await stores.readStore.close();
    await stores.blobStore.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the logs projection', () => {
  it('deletes thousands of logs, stored and in its own batch, writing them in parts; the checkpoint moves once all are written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'logs-projection-'));
    const stores = openEmbeddedStores(dir);
    try {
      const store = stores.eventStore;
      const createAll = (ids: readonly string[], ownerId: string) =>
        Promise.all(
          ids.map((id) =>
            store.append({
              stream: `${log.category}-${id}`,
              expected: 'no_stream',
              events: [event(log.createdEvent, { id, ...fields(ownerId, '2026-10-01T00:00:00.000Z') })],
            }),
          ),
        );
      const stored = Array.from({ length: 2500 }, () => randomUUID());
      await createAll(stored, 'T-9');
      const keptId = randomUUID();
      await createAll([keptId], 'T-8');
      const first = new Projector(logsProjection(), store, stores.readStore, { batchSize: 10_000 });
      await first.start();
      expect(await first.waitFor(await store.headPosition(), 30_000)).toBe(true);
      await first.stop();
      // Then more, and the deletion, folded together in one batch.
      await createAll(
        Array.from({ length: 2500 }, () => randomUUID()),
        'T-9',
      );
      const id = randomUUID();
      const upTo = await store.headPosition();
      const deletion = await store.append({
        stream: `${logDeletion.category}-${id}`,
        expected: 'no_stream',
        events: [
          event(logDeletion.createdEvent, {
            id,
            logTypeCode: 'HTTP',
            olderThan: '2026-10-15T00:00:00.000Z',
            ownerType: 'TICKET',
            ownerId: 'T-9',
            upTo: upTo.toString(),
            deleted: 5000,
            deletedIds: [],
          }),
        ],
      });
      const second = new Projector(logsProjection(), store, stores.readStore, { batchSize: 10_000 });
      await second.start();
      expect(await second.waitFor(deletion.position, 30_000)).toBe(true);
      await second.stop();
      expect((await stores.readStore.scan(log.collection, { limit: 100 })).map((d) => d.id)).toEqual([keptId]);
      expect(await stores.readStore.checkpoint(log.collection)).toBe(deletion.position);
    } finally {
      await stores.eventStore.close();
      await stores.readStore.close();
      await stores.blobStore.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('deletes exactly the matching logs last written at or before the deletion, in any batching and in memory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'logs-projection-'));
    const stores = openEmbeddedStores(dir);
    try {
      const { gone, kept } = await scenario(stores.eventStore);
      const documents = new Map<string, VersionedDocument>();
      for (const e of await stores.eventStore.readAll({ after: 0n, limit: 1000 }))
        foldOne(logsProjection(), documents, e, (_e, error) => {
          throw error;
        });
      const liveIn = [...documents.values()].filter((d) => d.doc !== null).map((d) => d.id);
      expect(liveIn.sort()).toEqual([...kept].sort());
      expect(gone.every((id) => documents.get(id)?.doc === null)).toBe(true);

      const inMemory = Object.fromEntries(liveIn.map((id) => [id, documents.get(id)?.doc]));
      for (const batchSize of [1000, 1]) {
        const folded = await live(batchSize);
        // Ids differ per run: compare the documents by their content.
        const strip = (d: unknown) => {
          const { id: _id, auditInfo: _a, correlationId: _c, ...rest } = d as Record<string, unknown>;
          return rest;
        };
        expect([...folded.values()].map((d) => strip(d.doc)).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))).toEqual(
          Object.values(inMemory)
            .map(strip)
            .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
        );
        expect(folded.size).toBe(kept.length);
      }
    } finally {
      await stores.eventStore.close();
      await stores.readStore.close();
      await stores.blobStore.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
