// What every route answers about a record it wrote or read, and how it reads a record's id from a
// path: written once here, so that no route sets these headers or checks an id its own way.
// - ETag: the record's version (`If-Match` sends it back);
// - X-Event-Position: the log position of a write, which a client passes as `minPosition`;
// - Location: where a created record (or an accepted job) is read.

import type { FastifyReply } from 'fastify';
import type { Position } from '../domain/ports.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import type { WriteResult } from '../domain/resource/service.ts';
import { malformedUuid } from '../domain/shared/errors.ts';
import { isUuid } from '../domain/shared/ids.ts';
import type { AppDeps } from './module.ts';
import { waitForReadModelAt } from './readModelWait.ts';

/** X-Event-Position of a write; none when nothing was appended. */
export function eventPosition(reply: FastifyReply, at: Position | undefined): FastifyReply {
  if (at !== undefined) void reply.header('x-event-position', at.toString());
  return reply;
}

/** ETag of a record's version. */
export const versionTag = (reply: FastifyReply, version: number): FastifyReply => reply.header('etag', `"${String(version)}"`);

/** A record read: its version as ETag, and the answer (the record, or the record expanded). */
export const sendRecord = (reply: FastifyReply, record: { auditInfo: { version: number } }, answer: unknown = record): FastifyReply =>
  versionTag(reply, record.auditInfo.version).send(answer);

/** Location of a created record or of an accepted job. */
export const location = (reply: FastifyReply, path: string): FastifyReply => reply.header('location', path);

/** The headers of a write (ETag, X-Event-Position), and with `immediatelyRefresh=true` the wait
 * until `readModel` reflects it. */
export async function answerWrite(
  deps: Pick<AppDeps, 'eventStore' | 'readModels'>,
  reply: FastifyReply,
  readModel: string,
  result: WriteResult,
  refresh: boolean | undefined,
): Promise<void> {
  versionTag(reply, result.version);
  eventPosition(reply, result.position);
  if (refresh === true) await waitForReadModelAt(deps, readModel, result.position);
}

/** A path's id that must be a uuid: 400 MALFORMED_UUID otherwise (`field` names the parameter). */
export function uuidParam(value: string, field = 'id'): string {
  if (!isUuid(value)) throw malformedUuid(field, value);
  return value;
}

/** A path's `{idOrCode}`: any code, or for a resource without codes its uuid (400 otherwise). */
export const recordKey = (def: ResourceDefinition, idOrCode: string): string => (def.hasCode ? idOrCode : uuidParam(idOrCode));
