// The decisions of a resource's commands and reads beyond its decider, as pure functions of what
// was loaded: the locks a change needs, what an Idempotency-Key's request means and which record it
// names, how a referring record is named in a 409, what history shows of an event, and the command
// handler's view of a resource command. application/resourceService.ts loads what they need over
// the ports and runs them.

import type { Position, RecordedEvent } from '../ports.ts';
import { requestHashOf, type CommandContext, type CommandSpec } from '../shared/commandHandler.ts';
import { codeTaken, keyTaken, malformedUuid, validationFailed } from '../shared/errors.ts';
import type { LockRequest } from '../shared/keyedLocks.ts';
import { isUuid, isUuidV4, uuidV5 } from '../shared/ids.ts';
import type { FoldSpec } from '../shared/streamFold.ts';
import { isPlainObject, memberOf, type JsonObject, type JsonPatchOp } from '../shared/json.ts';
import type { DecideContext, Reference, ResourceDefinition, ResourceRecordLike } from './defineResource.ts';
import {
  SCHEMA_VERSION,
  decide,
  evolve,
  initialState,
  keyOfScope,
  kindOf,
  streamOf,
  toRecord,
  upcast,
  type ResourceCommand,
  type ResourceRecord,
  type RecordState,
} from './decider.ts';

export type WriteResult = {
  record: ResourceRecord | undefined;
  version: number;
  position: Position | undefined;
  /** False when nothing was written: no change, or a retry under the same Idempotency-Key. */
  written?: boolean;
};

export type HistoryEntry = {
  version: number;
  type: string;
  at: string;
  actor: string;
  requestId?: string;
  correlationId?: string;
  data: Record<string, unknown>;
  changes: JsonPatchOp[];
};

export type ReadAt = { version?: number; asOf?: string };

/** A create's or replace's body without what the service ignores in it (an echoed auditInfo), so
 * that a retry that echoes it is still the same request. */
export function meaningOf(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('auditInfo' in body)) return body;
  const { auditInfo: _ignored, ...rest } = body as Record<string, unknown>;
  return rest;
}

/** Codes a record took with an event: a create's or replace's `code`, or a patch's. */
export function codesOf(event: RecordedEvent): string[] {
  const patch = event.data.patch;
  const code = event.data.code ?? (typeof patch === 'object' && patch !== null ? (patch as { code?: unknown }).code : undefined);
  return typeof code === 'string' ? [code] : [];
}

/** The fold commands use too (same resource and stream), so reads and writes share its cache. */
export const foldSpec = (def: ResourceDefinition, id: string): FoldSpec<RecordState> => ({
  resource: def.errorPrefix,
  stream: streamOf(def, id),
  initial: initialState,
  evolve: (s, e) => evolve(def, s, e),
});

/** A live record as the API shows it: with the read-only members nothing filled yet (one an own
 * event stored on the record shows as stored). */
export const shown = (def: ResourceDefinition, state: RecordState & { status: 'active' | 'deleted' }): ResourceRecord => {
  const record = toRecord(state);
  if (Object.keys(def.readOnly).length === 0) return record;
  const { auditInfo, ...rest } = record;
  const unfilled = Object.entries(def.readOnly).filter(([k]) => !Object.hasOwn(rest, k));
  return { ...rest, ...Object.fromEntries(unfilled), auditInfo };
};

/** What history and the audit feed show of an event's data: its type's current shape, never a
 * hidden part (a password hash, a thumbnail's ref). The one definition of what of an event is secret. */
export function shownEventData(def: ResourceDefinition, event: Pick<RecordedEvent, 'type' | 'data' | 'schemaVersion'>): JsonObject {
  const kind = kindOf(def, event.type);
  const data = kind === undefined ? event.data : upcast(def, kind, event.data, event.schemaVersion);
  if (def.hidden.length === 0) return data;
  return Object.fromEntries(Object.entries(data).filter(([k]) => !def.hidden.includes(k)));
}

/** A reference of another resource to this one. */
export type Referrer = { readonly resource: ResourceDefinition; readonly reference: Reference };

/** The references among some resources that name `def` and restrict its delete. */
export const referrersOf = (def: ResourceDefinition, all: readonly ResourceDefinition[]): Referrer[] =>
  all.flatMap((resource) =>
    resource.references
      .filter((r) => r.restrict === true && typeof r.by !== 'object' && r.resource() === def)
      .map((reference) => ({ resource, reference })),
  );

/** Longest chain of references an acyclic reference follows (deeper trees are refused as cycles would be). */
export const MAX_REFERENCE_CHAIN = 1000;

const valuesOf = (candidate: JsonObject, field: string): unknown[] => {
  const value = memberOf(candidate, field);
  return Array.isArray(value) ? value : value === undefined || value === null ? [] : [value];
};

/** Values compared as the schema stores them: UUIDs in lower case, codes exactly (they are case-sensitive). */
const sameValue = (v: unknown): unknown => (typeof v === 'string' && isUuid(v) ? v.toLowerCase() : v);

/** The values of a reference a change sets anew: those the record did not hold already. */
export function newValues(candidate: JsonObject, before: JsonObject | undefined, field: string): unknown[] {
  const held = new Set(valuesOf(before ?? {}, field).map(sameValue));
  return valuesOf(candidate, field).filter((v) => !held.has(sameValue(v)));
}

/** Whether a value of a reference is one it takes without a record (Reference.builtIn). */
export const isBuiltInValue = (ref: Reference, value: unknown): boolean => typeof value === 'string' && ref.builtIn?.is(value) === true;

/** The values of a reference a change sets anew that name records: new, and not built in. */
export const newNamedValues = (ref: Reference, candidate: JsonObject, before: JsonObject | undefined): unknown[] =>
  newValues(candidate, before, ref.field).filter((v) => !isBuiltInValue(ref, v));

/** The lock of one record as a reference names it: by id or by code. */
const recordLock = (category: string, by: 'id' | 'code', value: unknown): string => `ref:${category}:${by}:${String(sameValue(value))}`;

/** The locks of the record a change names alone: deleted, or changing the code references hold. */
function ownLocks(def: ResourceDefinition, referrers: readonly Referrer[], change: LockedChange): LockRequest[] {
  const { candidate, before } = change;
  if (referrers.length === 0 || before === undefined) return [];
  const code = before.code;
  if (change.deleting && change.id !== undefined) {
    return [
      { name: recordLock(def.category, 'id', change.id), exclusive: true },
      ...(code === undefined ? [] : [{ name: recordLock(def.category, 'code', code), exclusive: true }]),
    ];
  }
  const recoded =
    isPlainObject(candidate) && code !== undefined && code !== candidate.code && referrers.some((r) => r.reference.by === 'code');
  // A change of what grants roles (adminOnly: a group's associatedUserRoleId) takes the record
  // alone: a referrer that judges it while naming the record anew (a user joining a group, which
  // takes an admin when the group carries a role) waits, and is judged on the record as changed.
  const granting = isPlainObject(candidate) && def.adminOnly.some((f) => JSON.stringify(candidate[f]) !== JSON.stringify(before[f]));
  if (granting)
    return [
      ...(change.id === undefined ? [] : [{ name: recordLock(def.category, 'id', change.id), exclusive: true }]),
      ...(code === undefined ? [] : [{ name: recordLock(def.category, 'code', code), exclusive: true }]),
    ];
  return recoded ? [{ name: recordLock(def.category, 'code', code), exclusive: true }] : [];
}

export type LockedChange = { id: string | undefined; candidate: unknown; before: JsonObject | undefined; deleting: boolean };

/** The locks a change needs (most need none): a write adding a restricting reference shares the
 * target record's lock, which a delete (or a code change) of that record takes alone; a write
 * setting an acyclic field takes its tree's lock alone. */
export function lockPlan(def: ResourceDefinition, referrers: readonly Referrer[], change: LockedChange): LockRequest[] {
  const plan = ownLocks(def, referrers, change);
  const { candidate, before } = change;
  if (!isPlainObject(candidate)) return plan;
  for (const ref of def.references) {
    const fresh = newNamedValues(ref, candidate, before);
    if (fresh.length === 0) continue;
    if (ref.restrict === true && typeof ref.by !== 'object')
      for (const v of fresh) plan.push({ name: recordLock(ref.resource().category, ref.by ?? 'id', v), exclusive: false });
    if (ref.acyclic === true) plan.push({ name: `tree:${def.category}.${ref.field}`, exclusive: true });
  }
  return plan;
}

/** Whether locks held cover a plan (each name held, alone where the plan wants it alone). */
export const holds = (held: readonly LockRequest[], plan: readonly LockRequest[]): boolean =>
  plan.every((p) => held.some((h) => h.name === p.name && (h.exclusive || !p.exclusive)));

export type ReferenceProblems = { missing: string[]; cycle: string[]; invalid: string[] };

/** How a referring record is named in a 409: its code, else its id. */
export const labelOf = (r: ResourceRecordLike): string => (typeof r.code === 'string' ? r.code : r.id);

/** Referring records a 409 names, at most, per reference (it counts them all). */
export const NAMED = 5;

/** A 409's line of one reference: how many records name this one, the labels of those the caller
 * may read (`named`, of `readable` in all), and how many it may not read, never which. */
export function referrerLine(
  { resource, reference }: Referrer,
  total: number,
  named: readonly ResourceRecordLike[],
  readable: number,
): string {
  const labels = named.slice(0, NAMED).map(labelOf);
  if (readable > NAMED) labels.push('…');
  const unreadable = total - readable;
  const said = [labels.join(', '), unreadable > 0 ? `${String(unreadable)} you may not read` : ''].filter((part) => part !== '');
  return `${resource.path}.${reference.field}: ${String(total)} ${resource.name} record(s) name it (${said.join('; ')})`;
}

/** The 409 of a unique key held by another record. */
export function keyTakenError(def: ResourceDefinition, reservation: { scope: string; code: string }): Error | undefined {
  const key = keyOfScope(def, reservation.scope);
  if (key === undefined || key.name === 'code') return undefined;
  const values = key.fields.length === 1 ? [reservation.code] : (JSON.parse(reservation.code) as unknown[]);
  return keyTaken(def.errorPrefix, key.name, Object.fromEntries(key.fields.map((f, i) => [f, values[i]])));
}

export type HistoryPage = { entries: AsyncIterable<HistoryEntry>; total: number };

export const decideContextOf = (
  ctx: CommandContext,
  refs: DecideContext['refs'],
  resourceAt: DecideContext['resourceAt'],
): DecideContext => ({
  now: ctx.now,
  actor: ctx.actor,
  refs,
  ...(resourceAt === undefined ? {} : { resourceAt }),
  ...(ctx.admit === undefined ? {} : { admit: ctx.admit }),
  ...(ctx.privileged === undefined ? {} : { privileged: ctx.privileged }),
});

export type Run = {
  id: string;
  command: ResourceCommand;
  ctx: CommandContext;
  expectedVersion: number | undefined;
  decideContext: DecideContext;
};

/** The command handler's view of a resource command on one record. */
export const commandSpec = (
  def: ResourceDefinition,
  { id, command, expectedVersion, decideContext }: Omit<Run, 'ctx'>,
): CommandSpec<RecordState> => ({
  resource: def.errorPrefix,
  stream: streamOf(def, id),
  initial: initialState,
  evolve: (s, e) => evolve(def, s, e),
  decide: (s) => decide(def, s, command, decideContext),
  schemaVersion: SCHEMA_VERSION,
  keyTaken: (reservation) => keyTakenError(def, reservation) ?? codeTakenFallback(def, reservation.code),
  ...(expectedVersion === undefined ? {} : { expectedVersion }),
});

export const writeResult = (
  def: ResourceDefinition,
  result: { state: RecordState; version: number | undefined; position: Position | undefined; written: boolean },
): WriteResult => {
  const { state } = result;
  return {
    record: state.status === 'active' ? shown(def, state) : undefined,
    version: result.version ?? 0,
    position: result.position,
    written: result.written,
  };
};

export const codeTakenFallback = (def: ResourceDefinition, code: string): Error => codeTaken(def.errorPrefix, code);

/** Times a guarded change is judged again because another write came between. */
export const GUARD_ROUNDS = 16;

/** The id of a record being created: the client's (a UUIDv4), else one derived from the
 * Idempotency-Key (so a retry finds the same record), else a fresh one. */
export function newRecordId(def: ResourceDefinition, input: unknown, ctx: CommandContext, anyUuid = false): string {
  const sent = typeof input === 'object' && input !== null ? (input as { id?: unknown }).id : undefined;
  if (typeof sent === 'string' && !isUuid(sent)) throw malformedUuid('id', sent);
  if (typeof sent === 'string' && !anyUuid && !isUuidV4(sent)) {
    throw validationFailed('A client-chosen id must be a random UUID (version 4)', [`id: ${JSON.stringify(sent)} is not a UUIDv4`]);
  }
  if (typeof sent === 'string') return sent.toLowerCase();
  return ctx.idempotencyKey === undefined ? ctx.newId() : keyedRecordId(def, ctx.actor, ctx.idempotencyKey);
}

/** The id of the record a create under an Idempotency-Key makes: the same actor and key, the same id. */
export const keyedRecordId = (def: ResourceDefinition, actor: string, idempotencyKey: string): string =>
  uuidV5(`${def.category}|${actor}|${idempotencyKey}`);

export type KeyedCreate = { input: unknown; ctx: CommandContext & { idempotencyKey: string } };

/** The context with the hash of what the request means, when it carries an Idempotency-Key. */
export const keyedContext = (
  def: ResourceDefinition,
  ctx: CommandContext,
  operation: string,
  target: string,
  body: unknown,
): CommandContext =>
  ctx.idempotencyKey === undefined
    ? ctx
    : { ...ctx, requestHash: requestHashOf({ operation, resource: def.path, target, body: meaningOf(body) }) };
