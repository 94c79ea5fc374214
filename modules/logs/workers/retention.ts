// The retention pass: deletions older than the retention whose logs are not purged yet are due;
// each purges the streams of its logs that nothing wrote since the deletion's position (so never a
// live log), then records the purge on the deletion, which stays.

import { log, logDeletion } from '../domain/log.ts';
import type { BlobStore } from '../../../domain/ports.ts';
import { streamOf } from '../../../domain/resource/decider.ts';
import { toQuery, type FilterItem } from '../../../domain/shared/filtering.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { forgetFolds } from '../../../application/streamFold.ts';
import type { ModuleContext } from '../../../api/module.ts';
import { dueInReadModel, type Schedule } from '../../../workers/scheduler.ts';

/** The actor of the retention pass's writes. */
export const LOG_RETENTION_ACTOR = 'system:log-retention';
/** Default days between a deletion and the purge of its logs' events (LOG_RETENTION_DAYS). */
export const DEFAULT_LOG_RETENTION_DAYS = 30;
/** Streams checked or purged between two turns of the event loop. */
const PURGE_PART = 1000;

/** Lets the event loop go (the embedded stores answer synchronously: a long loop of their calls
 * would hold every request meanwhile). */
export const turn = () => new Promise((resolve) => setImmediate(resolve));

async function idsIn(blobs: BlobStore, refs: readonly JsonObject[]): Promise<string[]> {
  const ids: string[] = [];
  for (const ref of refs) {
    const blob = await blobs.get(String(ref.sha256));
    if (blob === undefined) throw new Error(`blob ${String(ref.sha256)} of a log deletion is missing`);
    ids.push(...(JSON.parse(new TextDecoder().decode(blob.content)) as string[]));
  }
  return ids;
}

export function retentionSchedule(ctx: ModuleContext): Schedule {
  const days = ctx.settings.logs?.retentionDays ?? DEFAULT_LOG_RETENTION_DAYS;
  const deletions = ctx.runtime.service(logDeletion);
  return {
    name: 'log-retention',
    due: (now) => {
      const cutoff = new Date(now.getTime() - days * 86_400_000).toISOString();
      const filter: FilterItem[] = [
        { column: 'purgedAt', operator: 'IS_NULL' },
        { column: 'auditInfo.whenInserted', operator: 'LTE', value: cutoff },
      ];
      return dueInReadModel(
        ctx.readStore,
        ctx.readModels,
        logDeletion.collection,
        toQuery({ filter, sort: [] }, logDeletion.columns, logDeletion.defaultSort),
      );
    },
    run: async (item, now) => {
      const upTo = BigInt(String(item.upTo));
      const streams: string[] = [];
      for (const [i, id] of (await idsIn(ctx.blobStore, (item.deletedIds ?? []) as JsonObject[])).entries()) {
        const stream = streamOf(log, id);
        const last = (await ctx.eventStore.readStream(stream)).at(-1);
        if (last !== undefined && last.position <= upTo) streams.push(stream);
        if (i % PURGE_PART === 0) await turn();
      }
      let events = 0;
      for (let i = 0; i < streams.length; i += PURGE_PART) {
        const part = streams.slice(i, i + PURGE_PART);
        events += await ctx.eventStore.purge(part);
        forgetFolds(
          ctx.runtime,
          part.map((stream) => ({ resource: log.errorPrefix, stream })),
        );
        await turn();
      }
      await deletions.execute(
        item.id,
        { type: 'Purge', streams: streams.length, events },
        { actor: LOG_RETENTION_ACTOR, now, newId: ctx.newId, requestId: ctx.newId(), idempotencyKey: `purge:${item.id}` },
      );
      return true;
    },
  };
}
