// Events as stored and as read back: the metadata the adapter writes with each event (the domain's,
// its schema version, and the marks of the codes an append claimed and released), the port's
// RecordedEvent made from what the client returns, and the recognition of a retried append by its
// event ids.

import type { Position as KurrentPosition } from '@kurrent/kurrentdb-client';
import type { AppendResult, EventMetadata, NewEvent, RecordedEvent } from '../../domain/ports.ts';
import { positionOf } from './positions.ts';

/** Adapter-private metadata key: the codes an append claimed and released, read back by the claim
 * protocol from the holder's own stream and stripped from what readers see. */
export const CODE_MARKS_KEY = 'adapter:codes';

/** Reservation stream names of the codes an append took and gave up. */
export type CodeMarks = { claimed: readonly string[]; released: readonly string[] };

export const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** What is stored as an event's metadata: the domain's, plus its schema version and the marks. */
export function toStoredMetadata(event: Pick<NewEvent, 'metadata' | 'schemaVersion'>, marks?: CodeMarks): Record<string, unknown> {
  const stored: Record<string, unknown> = { ...event.metadata, schemaVersion: event.schemaVersion };
  if (marks !== undefined) stored[CODE_MARKS_KEY] = { claimed: [...marks.claimed], released: [...marks.released] };
  return stored;
}

export type ReadMetadata = { metadata: EventMetadata; schemaVersion: number; marks: CodeMarks | undefined };

/** Inverse of toStoredMetadata. Events written by other tools (no or non-JSON metadata) read as
 * schema version 1 with an empty actor and time. */
export function fromStoredMetadata(raw: unknown): ReadMetadata {
  if (!isRecord(raw)) return { metadata: { actor: '', at: '' }, schemaVersion: 1, marks: undefined };
  const { schemaVersion, [CODE_MARKS_KEY]: marks, ...rest } = raw;
  const metadata = { actor: '', at: '', ...rest } as EventMetadata;
  return {
    metadata,
    schemaVersion: typeof schemaVersion === 'number' ? schemaVersion : 1,
    marks: isRecord(marks) ? { claimed: strings(marks.claimed), released: strings(marks.released) } : undefined,
  };
}

/** An event as the client returns it (JSON or binary), narrowed to what the adapter reads.
 * `created` is the server's clock when it wrote the event (whole seconds through the Rust reader). */
export type StoredEvent = {
  streamId: string;
  id: string;
  revision: bigint;
  type: string;
  data: unknown;
  metadata: unknown;
  created?: Date | undefined;
  position?: KurrentPosition | undefined;
};

/** The fence's type (codeClaims.ts): an adapter's event, never a domain one (whose types have no colon). */
export const CODE_CLAIM_VOIDED = 'adapter:CodeClaimVoided';

/** A fence: no append made under the claim at `claimRevision` of `codeStream` may land after it. */
export type Fence = { codeStream: string; claimRevision: bigint };

export const fenceData = (f: Fence): Record<string, unknown> => ({ codeStream: f.codeStream, claimRevision: f.claimRevision.toString() });

/** The fence an event is, if it is one. */
export function fenceOf(stored: Pick<StoredEvent, 'type' | 'data'>): Fence | undefined {
  if (stored.type !== CODE_CLAIM_VOIDED || !isRecord(stored.data)) return undefined;
  const { codeStream, claimRevision } = stored.data;
  return typeof codeStream === 'string' && typeof claimRevision === 'string'
    ? { codeStream, claimRevision: BigInt(claimRevision) }
    : undefined;
}

/** An event as read, with what the adapter keeps in it: an append's code marks, or the fence it is. */
export type MarkedEvent = { event: RecordedEvent; marks: CodeMarks | undefined; fence?: Fence | undefined };

export function toRecordedEvent(stored: StoredEvent): MarkedEvent {
  const { metadata, schemaVersion, marks } = fromStoredMetadata(stored.metadata);
  const fence = fenceOf(stored);
  return {
    ...(fence === undefined ? {} : { fence }),
    event: {
      id: stored.id,
      stream: stored.streamId,
      revision: Number(stored.revision),
      position: positionOf(stored.position),
      type: stored.type,
      schemaVersion,
      data: isRecord(stored.data) ? stored.data : { value: stored.data },
      metadata,
    },
    marks,
  };
}

/** Event ids are UUIDs, which the server hands back in its own (lower-case) spelling. */
export const sameId = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** When the request's event ids are already in the stream, one after another, the result of the
 * append that wrote them; 'partial' when only some are; undefined when none is. */
export function duplicateOf(
  stream: readonly Pick<RecordedEvent, 'id' | 'revision' | 'position'>[],
  ids: readonly string[],
): AppendResult | 'partial' | undefined {
  const [firstId = ''] = ids;
  const first = stream.findIndex((e) => sameId(e.id, firstId));
  if (first < 0) return stream.some((e) => ids.some((id) => sameId(e.id, id))) ? 'partial' : undefined;
  const run = stream.slice(first, first + ids.length);
  const last = run.at(-1);
  if (last === undefined || run.length !== ids.length || run.some((e, i) => !sameId(e.id, ids[i] ?? ''))) return 'partial';
  return { revision: last.revision, position: last.position, duplicate: true };
}
