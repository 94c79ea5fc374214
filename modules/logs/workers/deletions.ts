// What this process keeps of the log's deletions: every LogDeletionCreated read so far (followed
// on from where the last read ended; they are few), and the lock that replaces of logs share
// against a deletion, which takes it alone (see api/deleteOldLogs.ts for why). One of each per
// runtime (application/runtime.ts), never module-level.

import { deletedBy, deletionOf, log, logDeletion, type Deletion } from '../domain/log.ts';
import { conditionsOf } from '../domain/deletions.ts';
import type { EventStore, Position } from '../../../domain/ports.ts';
import type { ResourceRecord } from '../../../domain/resource/decider.ts';
import { streamOf } from '../../../domain/resource/decider.ts';
import { notFound } from '../../../domain/shared/errors.ts';
import { KeyedLocks } from '../../../domain/shared/keyedLocks.ts';
import { Slot, type Runtime } from '../../../application/runtime.ts';

type LogState = { locks: KeyedLocks; deletions: DeletionLog };
const logState = new Slot<LogState>((runtime) => ({ locks: new KeyedLocks(), deletions: new DeletionLog(runtime.events) }));
const stateOf = (runtime: Runtime): LogState => runtime.own(logState);
const LOCK = 'logs';

/** Every LogDeletionCreated of the log, read on from where the last read ended. */
class DeletionLog {
  readonly #store: EventStore;
  #after: Position = 0n;
  #list: (Deletion & { at: string })[] = [];
  #reading: Promise<void> = Promise.resolve();

  constructor(store: EventStore) {
    this.#store = store;
  }

  current(): Promise<readonly (Deletion & { at: string })[]> {
    // A failed read (a store down) fails its callers, not every later one.
    this.#reading = this.#reading.catch(() => undefined).then(() => this.#readOn());
    return this.#reading.then(() => this.#list);
  }

  async #readOn(): Promise<void> {
    for (;;) {
      const batch = await this.#store.readAll({
        after: this.#after,
        limit: 500,
        categories: [logDeletion.category],
        types: [logDeletion.createdEvent],
      });
      for (const e of batch) {
        const deletion = deletionOf(e.data, conditionsOf);
        if (deletion !== undefined) this.#list = [...this.#list, { ...deletion, at: e.metadata.at }];
      }
      this.#after = batch.at(-1)?.position ?? this.#after;
      if (batch.length < 500) return;
    }
  }
}

/** 404 for a log a deletion removed (its stream still holds it until the retention pass); with
 * `asOf`, only deletions made by then count. */
export async function assertNotDeleted(runtime: Runtime, record: ResourceRecord, asOf?: string): Promise<void> {
  const all = await stateOf(runtime).deletions.current();
  const deletions = asOf === undefined ? all : all.filter((d) => Date.parse(d.at) <= Date.parse(asOf));
  if (deletions.length === 0) return;
  const [last] = await runtime.events.readStream(streamOf(log, record.id), { from: record.auditInfo.version, limit: 1 });
  if (last === undefined || deletions.some((d) => deletedBy(d, record, last.position))) throw notFound(log.errorPrefix, record.id);
}

/** Runs a replace of a log (beside other replaces, never beside a deletion) or a deletion of logs
 * (alone: no replace of a log meanwhile). */
async function underLock<T>(runtime: Runtime, exclusive: boolean, run: () => Promise<T>): Promise<T> {
  const release = await stateOf(runtime).locks.acquire([{ name: LOCK, exclusive }]);
  try {
    return await run();
  } finally {
    release();
  }
}

export const asReplace = <T>(runtime: Runtime, replace: () => Promise<T>): Promise<T> => underLock(runtime, false, replace);
export const asDeletion = <T>(runtime: Runtime, deletion: () => Promise<T>): Promise<T> => underLock(runtime, true, deletion);
