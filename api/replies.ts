// What every route answers about a record it wrote or read, and how it reads a record's id from a
// path: written once here, so that no route sets these headers or checks an id its own way.
// - ETag: the record's version (`If-Match` sends it back on a write, `If-None-Match` on a read: 304);
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

/** An entity tag in an If-None-Match list, captured as its opaque part (`W/` dropped). */
const ENTITY_TAG = /(?:W\/)?"([^"]*)"/g;

/** Whether an If-None-Match header matches an entity tag, by weak comparison (RFC 9110 §13.1.2:
 * two tags match when their opaque parts are equal, either or both weak): `*` matches any current
 * representation, a list when one of its tags does. A header with no tag in it matches nothing. */
export function noneMatchHolds(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const wanted = /^(?:W\/)?"([^"]*)"$/.exec(etag)?.[1];
  return wanted !== undefined && [...header.matchAll(ENTITY_TAG)].some((m) => m[1] === wanted);
}

/** A GET (or HEAD) whose If-None-Match holds the ETag already set on the reply: the client has
 * this representation, so 304 with no body (the ETag and the other headers still sent). */
export function notModified(reply: FastifyReply): boolean {
  const { method, headers } = reply.request;
  const etag = reply.getHeader('etag');
  return (method === 'GET' || method === 'HEAD') && typeof etag === 'string' && noneMatchHolds(headers['if-none-match'], etag);
}

/** A record read: its version as ETag, and the record; 304 when If-None-Match holds that version
 * (a record at one version is always the same). With `expanded`, the record with others as they are
 * now: the record's version (the tag If-Match takes) does not name that answer, so it is always sent. */
export const sendRecord = (reply: FastifyReply, record: { auditInfo: { version: number } }, expanded?: unknown): FastifyReply => {
  versionTag(reply, record.auditInfo.version);
  if (expanded !== undefined) return reply.send(expanded);
  return notModified(reply) ? reply.code(304).send() : reply.send(record);
};

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
