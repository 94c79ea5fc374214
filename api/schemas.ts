// Response shapes shared by every resource's routes.

import { z } from 'zod';
import { validationFailed } from '../domain/shared/errors.ts';
import { UUID_JSON_PATTERN } from '../domain/shared/ids.ts';

/** A whole number in a query string: decimal digits on the wire (no sign, exponent or spaces),
 * documented as the integer range it must fall in, which is what a client generates values from. */
export const queryInteger = (min: number, max: number) =>
  z
    .string()
    .regex(/^\d{1,16}$/, { error: 'expected a whole number in decimal digits' })
    .transform(Number)
    .pipe(z.int().min(min).max(max))
    .meta({ type: 'integer', minimum: min, maximum: max, pattern: undefined });

const sortInfo = z.object({ sorted: z.boolean(), unsorted: z.boolean(), empty: z.boolean() });

export const pageSchema = <T extends z.ZodType>(item: T) =>
  z.object({
    content: z.array(item),
    totalElements: z.int(),
    totalPages: z.int(),
    size: z.int(),
    number: z.int(),
    numberOfElements: z.int(),
    first: z.boolean(),
    last: z.boolean(),
    empty: z.boolean(),
    sort: sortInfo,
    pageable: z.object({
      sort: sortInfo,
      offset: z.int(),
      pageNumber: z.int(),
      pageSize: z.int(),
      paged: z.boolean(),
      unpaged: z.boolean(),
    }),
  });

export const historyEntrySchema = z
  .object({
    version: z.int(),
    type: z.string(),
    at: z.string(),
    actor: z.string(),
    requestId: z.string().optional(),
    correlationId: z.string().optional(),
    data: z.record(z.string(), z.unknown()),
    changes: z.array(z.object({ op: z.enum(['add', 'remove', 'replace']), path: z.string(), value: z.unknown().optional() })),
  })
  .meta({ id: 'HistoryEntry', description: "One event of a record's stream; changes are JSON Patch ops from the previous version." });

/** A path parameter naming a record: its uuid, or its code where the resource has codes (one
 * without codes answers 400 for anything but a uuid). */
export const idOrCode = () => z.string().min(1).max(255);

/** `{idOrCode}` of a resource without codes: its id, checked where it is used (400
 * MALFORMED_UUID), documented as a UUID. One name on every path of a resource, so that OpenAPI sees
 * one path (`/jobs/{id}` beside `/jobs/{idOrCode}` would be two templates of one path). */
export const idOnly = () =>
  idOrCode().meta({ format: 'uuid', pattern: UUID_JSON_PATTERN, description: "the record's id (this resource has no code)" });

/** The answer of a conditional read whose If-None-Match holds the current ETag: no body
 * (api/openapiProtocol.ts documents it and the If-None-Match header on every GET declaring it). */
export const notModifiedSchema = z.undefined();

/** The answer of an action that goes on in a job (SPEC.md "job acknowledgement"). */
export const JobAckSchema = z.object({ acknowledge: z.boolean(), jobId: z.uuid() }).meta({ id: 'JobAcknowledgement' });

/** `?expand=`: repeated or comma-separated values of a route's own list (checked by parseExpand),
 * documented as the repeated form with the values allowed. */
export const expandQuery = (allowed: readonly string[]) =>
  z
    .union([z.string().max(255), z.array(z.string().max(255)).max(10)])
    .optional()
    .meta({
      anyOf: undefined,
      type: 'array',
      items: { type: 'string', enum: [...allowed] },
      maxItems: 10,
      description: `any of ${allowed.join(', ')}; repeated or comma-separated`,
    });

/** The values an `?expand=` names, each one of `allowed` (400 naming those that are not). */
export function parseExpand<T extends string>(raw: string | string[] | undefined, allowed: readonly T[]): T[] {
  const expand = [raw ?? []]
    .flat()
    .flatMap((e) => e.split(','))
    .filter((e) => e !== '');
  const bad = expand.filter((e) => !(allowed as readonly string[]).includes(e));
  if (bad.length > 0)
    throw validationFailed(
      'Unknown expand',
      bad.map((e) => `query.expand: ${JSON.stringify(e)} is not one of ${allowed.join(', ')}`),
    );
  return expand as T[];
}
