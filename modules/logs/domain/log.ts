// Operation logs (SPEC.md "Log and log type"): high-volume, append-mostly records of one operation
// between applications (a request, its response, when, how long, with what result), each of a log
// type. A log is its own stream (`log-<uuid>`) in its own category with its own read model.
//
// "Delete old logs" removes many logs at once without writing an event per log: one
// LogDeletionCreated event in the deletion's own stream (`logDeletion-<uuid>`) names the filter
// and the log position it was decided at (`upTo`); the logs' projection folds it by deleting every
// log that matches the filter and was last written at or before `upTo`, so a rebuild of the read
// model gives the same documents. The deletion event stays in the log for good (who, when, which
// filter, how many); the retention pass later removes the deleted logs' own events physically
// (LogDeletionPurged records that it did).

import { z } from 'zod';
import type { Condition, FilterItem } from '../../../domain/shared/filtering.ts';
import { dateTime, jsonMap, longText, text, uuid } from '../../../domain/shared/fields.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { matchesAll } from '../../../domain/shared/matchQuery.ts';
import {
  command,
  created,
  defineResource,
  deleted,
  exhaustive,
  ownEvent,
  patched,
  replaced,
  type CommandOf,
  type EventOf,
  type ResourceDefinition,
} from '../../../domain/resource/defineResource.ts';
import { relatedEntity } from '../../notifications/domain/notification.ts';
import { logType } from '../../registries/domain/logType.ts';

const payload = () => longText(200_000);

/** What a log keeps of its log type: enough to read it without the registry. */
export const logTypeSummary = z
  .strictObject({ id: uuid().optional(), code: text().optional(), name: z.string().max(255).optional() })
  .meta({
    description:
      "The log type: on create or replace, its `code` (or `id`) may name it instead of `logTypeCode`; stored as the type's id, code and name at that time.",
  });

/** `endDate` not before `startDate`; one line naming the field. */
const endNotBeforeStart = (f: Record<string, unknown>): string[] =>
  typeof f.startDate === 'string' && typeof f.endDate === 'string' && f.endDate < f.startDate
    ? [`endDate: ${f.endDate} is before startDate ${f.startDate}`]
    : [];

/** Milliseconds from startDate to endDate (both normalised to UTC ISO strings). */
export const durationMs = (startDate: string, endDate: string): number => Date.parse(endDate) - Date.parse(startDate);

export const log: ResourceDefinition = defineResource({
  name: 'Log',
  events: { LogCreated: created(), LogReplaced: replaced(), LogPatched: patched(), LogDeleted: deleted() },
  path: 'logs',
  description:
    'An operation log: one request between applications and its response, with when it started and ended, its result and its log type. ' +
    '`logTypeCode` (or `logType.code` / `logType.id`) must name an existing log type (422 otherwise; 400 when neither is given). `endDate` ' +
    'may not be before `startDate`; `duration` is in milliseconds and, when absent, is `endDate - startDate`. `ownerType` and `ownerId` are not checked.',
  fields: z.strictObject({
    ownerType: z.string().max(255).optional(),
    ownerId: z.string().max(255).optional(),
    logType: logTypeSummary.optional(),
    logTypeCode: text(),
    startDate: dateTime(),
    request: payload(),
    response: payload(),
    resultCode: z.string().max(255).optional().meta({ description: 'For example an HTTP status code.' }),
    resultMessage: longText(4000).optional(),
    endDate: dateTime(),
    correlationId: text(),
    messageId: z.string().max(255).optional(),
    description: longText(4000).optional(),
    duration: z.int().min(0).optional().meta({ description: 'Milliseconds the operation took; when absent, endDate - startDate.' }),
    module: z.string().max(255).optional(),
    relatedData: jsonMap().optional(),
    relatedEntities: z.array(relatedEntity).max(1000).optional(),
  }),
  rules: [endNotBeforeStart],
  references: [{ field: 'logTypeCode', resource: () => logType, by: 'code' }],
  // (ownerType, ownerId) for by-owner, startDate for age, correlationId to follow one operation.
  indexed: ['ownerType', 'ownerId', 'startDate', 'correlationId', 'logTypeCode'],
  defaultSort: ['startDate'],
  operations: ['create', 'get', 'replace', 'versions', 'history', 'search', 'searchPage', 'count'],
  behaviour: {
    // The duration is derived when absent; the log type summary follows the type named.
    onChange(before, after, ctx) {
      const type = ctx.refs.get('logTypeCode')?.[0];
      const summary =
        type === undefined
          ? before?.logTypeCode === after.logTypeCode
            ? before?.logType
            : undefined
          : { id: type.id, code: type.code, ...(typeof type.name === 'string' ? { name: type.name } : {}) };
      const duration = typeof after.duration === 'number' ? after.duration : durationMs(String(after.startDate), String(after.endDate));
      return { ...after, duration, ...(summary === undefined ? {} : { logType: summary }) };
    },
  },
});

/** The filter of "delete old logs": every one of the four is required (API.md). */
export type DeletionFilter = { logTypeCode: string; olderThan: string; ownerType: string; ownerId: string };

const logDeletionEvents = {
  LogDeletionCreated: created({
    meaning:
      "Old logs were deleted (DELETE /api/v1/logs): the filter, the log position it was decided at (`upTo`) and how many. The logs' read model " +
      'drops every log matching the filter last written at or before `upTo`; no event is written per log.',
  }),
  LogDeletionReplaced: replaced(),
  LogDeletionPatched: patched(),
  LogDeletionDeleted: deleted(),
  LogDeletionPurged: ownEvent({
    meaning: "The retention pass removed the deleted logs' own events from the log for good: when, and how many streams and events.",
    data: z.strictObject({ at: dateTime(), streams: z.int().min(0), events: z.int().min(0) }),
    evolve: (r, d) => ({ ...r, fields: { ...r.fields, purgedAt: d.at, purgedStreams: d.streams, purgedEvents: d.events } }),
  }),
};
export type LogDeletionEvent = EventOf<typeof logDeletionEvents>;

const logDeletionCommands = {
  Purge: command(
    "The retention pass records that it removed the deleted logs' events (once: a purged deletion records nothing more).",
    z.strictObject({ streams: z.int().min(0), events: z.int().min(0) }),
  ),
};
export type LogDeletionCommand = CommandOf<typeof logDeletionCommands>;

export const logDeletion: ResourceDefinition<typeof logDeletionEvents, typeof logDeletionCommands> = defineResource({
  name: 'LogDeletion',
  path: 'log-deletions',
  description:
    'One "delete old logs" (DELETE /api/v1/logs): who asked and when (auditInfo), the filter, the log position it was decided at (`upTo`) and ' +
    "how many logs it deleted. It stays after the logs are gone. `purgedAt` is set when the retention pass removed the deleted logs' events " +
    'from the log for good.',
  fields: z.strictObject({
    logTypeCode: text().meta({ description: 'The `code` query parameter: the log type of the logs deleted.' }),
    olderThan: dateTime().meta({ description: 'Logs whose startDate is before this were deleted.' }),
    ownerType: text(),
    ownerId: text(),
    upTo: z
      .string()
      .regex(/^\d{1,40}$/)
      .meta({ description: 'The log position the deletion was decided at: logs last written after it were kept.' }),
    deleted: z.int().min(0),
    deletedIds: z
      .array(z.strictObject({ sha256: z.string().regex(/^[0-9a-f]{64}$/), size: z.int().min(0), contentType: text() }))
      .max(1000)
      .meta({ description: 'Blobs listing the ids of the deleted logs (JSON arrays), for the retention pass.' }),
    purgedAt: dateTime().optional(),
    purgedStreams: z.int().min(0).optional(),
    purgedEvents: z.int().min(0).optional(),
  }),
  indexed: ['purgedAt'],
  defaultSort: ['auditInfo.whenInserted'],
  operations: ['get', 'history', 'search', 'searchPage', 'count'],
  events: logDeletionEvents,
  commands: logDeletionCommands,
  behaviour: {
    decide(command, record, ctx) {
      switch (command.type) {
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the one command today; a second one meets the default
        case 'Purge':
          if (record.fields.purgedAt !== undefined) return [];
          return [{ type: 'LogDeletionPurged', data: { at: ctx.now.toISOString(), streams: command.streams, events: command.events } }];
        default:
          return exhaustive(command.type, 'log deletion command');
      }
    },
  },
});

/** The filter items of a deletion over the logs' columns: startDate strictly before olderThan. */
export const deletionFilter = (d: DeletionFilter): FilterItem[] => [
  { column: 'logTypeCode', operator: 'EQ', value: d.logTypeCode },
  { column: 'ownerType', operator: 'EQ', value: d.ownerType },
  { column: 'ownerId', operator: 'EQ', value: d.ownerId },
  { column: 'startDate', operator: 'LT', value: d.olderThan },
];

/** A recorded deletion as the logs' readers need it. */
export type Deletion = DeletionFilter & { upTo: bigint; conditions: readonly Condition[] };

/** Whether a log, last written at `lastPosition`, is one a deletion removed. */
export const deletedBy = (deletion: Deletion, record: JsonObject, lastPosition: bigint): boolean =>
  lastPosition <= deletion.upTo && matchesAll(record, deletion.conditions);

/** The deletion an event's data describes (LogDeletionCreated holds the deletion's fields). */
export function deletionOf(
  data: Record<string, unknown>,
  conditions: (filter: FilterItem[]) => readonly Condition[],
): Deletion | undefined {
  const { logTypeCode, olderThan, ownerType, ownerId, upTo } = data;
  if (
    typeof logTypeCode !== 'string' ||
    typeof olderThan !== 'string' ||
    typeof ownerType !== 'string' ||
    typeof ownerId !== 'string' ||
    typeof upTo !== 'string'
  )
    return undefined;
  const filter = { logTypeCode, olderThan, ownerType, ownerId };
  return { ...filter, upTo: BigInt(upTo), conditions: conditions(deletionFilter(filter)) };
}
