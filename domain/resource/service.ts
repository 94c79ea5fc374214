// Commands and single-record reads of a resource, over the EventStore port. Reads of one record
// fold its stream, so they reflect every acknowledged write. References are loaded here, before
// the decision, from the log itself (the referenced record's folded stream), not from a read model.

import type { EventStore, Position, RecordedEvent } from '../ports.ts';
import { handleCommand, handleNewStreams, keyReservation, requestHashOf, type ChangeGuard, type CommandContext, type CommandSpec } from '../shared/commandHandler.ts';
import { codeTaken, concurrentModification, isDomainError, keyTaken, malformedUuid, notFound, referenceCycle, referenceMissing, referenceUnusable, stillReferenced, unavailable, validationFailed } from '../shared/errors.ts';
import type { Alternatives, FilterItem } from '../shared/filtering.ts';
import { KeyedLocks, type LockRequest } from '../shared/keyedLocks.ts';
import { isUuid, isUuidV4, uuidV5 } from '../shared/ids.ts';
import { foldStream, type FoldSpec } from '../shared/streamFold.ts';
import { idIn } from '../shared/streams.ts';
import { applyMergePatch, diffJson, isPlainObject, memberOf, type JsonObject, type JsonPatchOp } from '../shared/json.ts';
import type { DecideContext, LiveRecord, OwnCommand, Reference, ResourceDefinition, ResourceRecordLike, UniqueKey } from './defineResource.ts';
import {
  SCHEMA_VERSION,
  decide,
  evolve,
  initialState,
  keyOfScope,
  keyScope,
  keyValue,
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

export type ResourceService = ReturnType<typeof resourceService>;


type Located = { id: string; stream: string; version: number };

/** Events read a chunk at a time, and the event loop let go between chunks: a record with
 * hundreds of large versions is folded without holding every other request meanwhile. */
const CHUNK = 50;

async function* chunksOf(store: EventStore, stream: string, upTo = Number.POSITIVE_INFINITY): AsyncGenerator<RecordedEvent[]> {
  for (let from = 0; from <= upTo; from += CHUNK) {
    const events = await store.readStream(stream, { from, limit: Math.min(CHUNK, upTo - from + 1) });
    if (events.length > 0) yield events;
    if (events.length < CHUNK) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** A create's or replace's body without what the service ignores in it (an echoed auditInfo), so
 * that a retry that echoes it is still the same request. */
function meaningOf(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || !('auditInfo' in body)) return body;
  const { auditInfo: _ignored, ...rest } = body as Record<string, unknown>;
  return rest;
}

/** Codes a record took with an event: a create's or replace's `code`, or a patch's. */
function codesOf(event: RecordedEvent): string[] {
  const patch = event.data.patch;
  const code = event.data.code ?? (typeof patch === 'object' && patch !== null ? (patch as { code?: unknown }).code : undefined);
  return typeof code === 'string' ? [code] : [];
}

/** The stream of a record named by uuid or code, and its last version (from the fold cache);
 * deleted records keep their stream. */
async function locate(def: ResourceDefinition, store: EventStore, idOrCode: string): Promise<Located | undefined> {
  if (isUuid(idOrCode)) {
    const id = idOrCode.toLowerCase();
    const { version } = await foldStream(foldSpec(def, id), store);
    if (version !== undefined) return { id, stream: streamOf(def, id), version };
  }
  if (!def.hasCode) return undefined;
  const stream = await store.findCode({ scope: def.category, code: idOrCode });
  const id = stream === undefined ? undefined : idIn(def.category, stream);
  if (stream === undefined || id === undefined) return undefined;
  const { version } = await foldStream(foldSpec(def, id), store);
  return version === undefined ? undefined : { id, stream, version };
}

/** The fold commands use too (same resource and stream), so reads and writes share its cache. */
const foldSpec = (def: ResourceDefinition, id: string): FoldSpec<RecordState> => ({
  resource: def.errorPrefix,
  stream: streamOf(def, id),
  initial: initialState,
  evolve: (s, e) => evolve(def, s, e),
});

/** How a text names a record: by its id or its code (a UUID as an id first), by code only, or by id
 * only. A reference by id is resolved by id only: a code shaped like a UUID (stored before such
 * codes were refused) must never stand in for a record with that id. */
type NamedBy = 'idOrCode' | 'code' | 'id';

/** The current state of a record named by uuid or code, from the cached fold of its stream. */
async function currentState(def: ResourceDefinition, store: EventStore, idOrCode: string, by: NamedBy): Promise<RecordState> {
  if (by !== 'code' && isUuid(idOrCode)) {
    const folded = await foldStream(foldSpec(def, idOrCode.toLowerCase()), store);
    if (folded.version !== undefined) return folded.state;
  }
  if (!def.hasCode || by === 'id') return initialState();
  const stream = await store.findCode({ scope: def.category, code: idOrCode });
  if (stream === undefined) return initialState();
  return (await foldStream(foldSpec(def, idIn(def.category, stream) ?? stream), store)).state;
}

/** Versions from..to-1 with who, when, under which request, and what changed; made one at a time
 * as they are sent, since a long history of large records is more than one answer may hold. */
async function* historyOf(def: ResourceDefinition, store: EventStore, stream: string, from: number, to: number): AsyncGenerator<HistoryEntry> {
  let state = initialState();
  for await (const chunk of chunksOf(store, stream, to - 1)) {
    for (const e of chunk) {
      const before = state.status === 'active' ? state.fields : {};
      state = evolve(def, state, e);
      if (e.revision < from) continue;
      const after = state.status === 'active' ? state.fields : {};
      const entry: HistoryEntry = { version: e.revision, type: e.type, at: e.metadata.at, actor: e.metadata.actor, data: shownEventData(def, e), changes: diffJson(before, after) };
      if (e.metadata.requestId !== undefined) entry.requestId = e.metadata.requestId;
      if (e.metadata.correlationId !== undefined) entry.correlationId = e.metadata.correlationId;
      yield entry;
    }
  }
}

/** A live record as the API shows it: with the read-only members nothing filled yet. */
export const shown = (def: ResourceDefinition, state: RecordState & { status: 'active' | 'deleted' }): ResourceRecord => {
  const record = toRecord(state);
  if (Object.keys(def.readOnly).length === 0) return record;
  const { auditInfo, ...rest } = record;
  return { ...rest, ...def.readOnly, auditInfo };
};

/** What history and the audit feed show of an event's data: its type's current shape, never a
 * hidden part (a password hash, a thumbnail's ref). The one definition of what of an event is secret. */
export function shownEventData(def: ResourceDefinition, event: Pick<RecordedEvent, 'type' | 'data' | 'schemaVersion'>): JsonObject {
  const kind = kindOf(def, event.type);
  const data = kind === undefined ? event.data : upcast(def, kind, event.data, event.schemaVersion);
  if (def.hidden.length === 0) return data;
  return Object.fromEntries(Object.entries(data).filter(([k]) => !def.hidden.includes(k)));
}

/** Live records of a resource whose fields match filter items (and `within`, when given: what the
 * caller may read), read from its read model once it has caught up with the log's head (the HTTP
 * layer provides it over the read store). */
export type ReferenceLookup = (def: ResourceDefinition, filter: readonly FilterItem[], limit: number, within?: Alternatives) => Promise<ResourceRecordLike[]>;

/** How many live records ReferenceLookup would find without a limit. */
export type ReferenceCount = (def: ResourceDefinition, filter: readonly FilterItem[], within?: Alternatives) => Promise<number>;

/** A reference of another resource to this one. */
export type Referrer = { readonly resource: ResourceDefinition; readonly reference: Reference };

export type ServiceOptions = {
  lookup?: ReferenceLookup;
  /** Counts the records that restrict a delete (a 409 says how many). */
  count?: ReferenceCount;
  /** The references that restrict this resource's delete (see referrersOf). */
  referrers?: readonly Referrer[];
};

/** The references among some resources that name `def` and restrict its delete. */
export const referrersOf = (def: ResourceDefinition, all: readonly ResourceDefinition[]): Referrer[] =>
  all.flatMap((resource) =>
    resource.references.filter((r) => r.restrict === true && typeof r.by !== 'object' && r.resource() === def).map((reference) => ({ resource, reference })),
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
function newValues(candidate: JsonObject, before: JsonObject | undefined, field: string): unknown[] {
  const held = new Set(valuesOf(before ?? {}, field).map(sameValue));
  return valuesOf(candidate, field).filter((v) => !held.has(sameValue(v)));
}

/** Locks of this process that keep reference checks and their writes from interleaving: a write
 * adding a restricting reference shares the target resource's lock, which a delete (or a code
 * change) of one of its records takes alone; a write setting an acyclic field takes its tree's
 * lock alone. (Across processes the window that remains is the read model's lag: see README.) */
const locks = new KeyedLocks();

/** The lock of one record as a reference names it: by id or by code. */
const recordLock = (category: string, by: 'id' | 'code', value: unknown): string => `ref:${category}:${by}:${String(sameValue(value))}`;

/** The locks of the record a change names alone: deleted, or changing the code references hold. */
function ownLocks(def: ResourceDefinition, options: ServiceOptions, change: LockedChange): LockRequest[] {
  const referrers = options.referrers ?? [];
  const { candidate, before } = change;
  if (referrers.length === 0 || before === undefined) return [];
  const code = before.code;
  if (change.deleting && change.id !== undefined) {
    return [{ name: recordLock(def.category, 'id', change.id), exclusive: true }, ...(code === undefined ? [] : [{ name: recordLock(def.category, 'code', code), exclusive: true }])];
  }
  const recoded = isPlainObject(candidate) && code !== undefined && code !== candidate.code && referrers.some((r) => r.reference.by === 'code');
  return recoded ? [{ name: recordLock(def.category, 'code', code), exclusive: true }] : [];
}

type LockedChange = { id: string | undefined; candidate: unknown; before: JsonObject | undefined; deleting: boolean };

function lockPlan(def: ResourceDefinition, options: ServiceOptions, change: LockedChange): LockRequest[] {
  const plan = ownLocks(def, options, change);
  const { candidate, before } = change;
  if (!isPlainObject(candidate)) return plan;
  for (const ref of def.references) {
    const fresh = newValues(candidate, before, ref.field);
    if (fresh.length === 0) continue;
    if (ref.restrict === true && typeof ref.by !== 'object') for (const v of fresh) plan.push({ name: recordLock(ref.resource().category, ref.by ?? 'id', v), exclusive: false });
    if (ref.acyclic === true) plan.push({ name: `tree:${def.category}.${ref.field}`, exclusive: true });
  }
  return plan;
}

/** Whether locks held cover a plan (each name held, alone where the plan wants it alone). */
const holds = (held: readonly LockRequest[], plan: readonly LockRequest[]): boolean =>
  plan.every((p) => held.some((h) => h.name === p.name && (h.exclusive || !p.exclusive)));

function needLookup(options: ServiceOptions): ReferenceLookup {
  if (options.lookup === undefined) throw new Error('this resource needs a read-model lookup (ServiceOptions.lookup)');
  return options.lookup;
}

function needCount(options: ServiceOptions): ReferenceCount {
  if (options.count === undefined) throw new Error('this resource needs a read-model count (ServiceOptions.count)');
  return options.count;
}

/** The live records a reference's value may name (several for a non-unique field); undefined
 * for a value of the wrong shape, left to the schema's 400. */
async function candidatesOf(target: ResourceDefinition, store: EventStore, ref: Reference, value: unknown, options: ServiceOptions): Promise<ResourceRecordLike[] | undefined> {
  if (typeof value !== 'string') return undefined;
  const by = ref.by ?? 'id';
  if (typeof by === 'object') return needLookup(options)(target, [{ column: by.field, operator: 'EQ', value }], 100);
  if (by === 'id' && !isUuid(value)) return undefined;
  const state = await currentState(target, store, value, by);
  return state.status === 'active' ? [toRecord(state)] : [];
}

/** The candidates the caller may read (all when its reads are not narrowed). */
async function visibleOnly(target: ResourceDefinition, candidates: ResourceRecordLike[] | undefined, visible: CommandContext['visible']): Promise<ResourceRecordLike[] | undefined> {
  if (candidates === undefined || visible === undefined) return candidates;
  const shown: ResourceRecordLike[] = [];
  for (const c of candidates) if (await visible(target.path, c)) shown.push(c);
  return shown;
}

/** Whether following an acyclic reference from a record leads back to `ownId`. */
async function leadsBack(target: ResourceDefinition, store: EventStore, field: string, from: ResourceRecordLike, ownId: string): Promise<boolean> {
  const seen = new Set<string>();
  let next = memberOf(from, field);
  for (let step = 0; typeof next === 'string' && isUuid(next); step++) {
    const id = next.toLowerCase();
    if (id === ownId || step >= MAX_REFERENCE_CHAIN) return true;
    if (seen.has(id)) return false;
    seen.add(id);
    const state = await currentState(target, store, id, 'id');
    if (state.status !== 'active') return false;
    next = memberOf(state.fields, field);
  }
  return false;
}

type ReferenceProblems = { missing: string[]; cycle: string[]; invalid: string[] };

async function loadReference(
  { def, store, options, now, ownId, before, visible }: LoadContext & { def: ResourceDefinition; store: EventStore },
  ref: Reference,
  candidate: JsonObject,
  problems: ReferenceProblems,
): Promise<ResourceRecordLike[]> {
  const target = ref.resource();
  const found: ResourceRecordLike[] = [];
  // Values the record already held were checked when it took them: a record stays changeable
  // when what it names has since expired (a user whose type is no longer valid can be disabled).
  for (const v of newValues(candidate, before, ref.field)) {
    const shown = JSON.stringify(v);
    if (ref.acyclic === true && typeof v === 'string' && v.toLowerCase() === ownId) {
      problems.cycle.push(`${ref.field}: a ${def.name} cannot name itself`);
      continue;
    }
    // Another record the caller names must be one it may read (a kind from a registry need not).
    const candidates = await visibleOnly(target, await candidatesOf(target, store, ref, v, options), ref.private === true ? visible : undefined);
    if (candidates === undefined) continue;
    const usable = ref.valid === undefined ? candidates : candidates.filter((c) => ref.valid?.(c, now) === true);
    const record = usable[0];
    if (candidates.length === 0) problems.missing.push(`${ref.field}: no ${target.name} ${typeof ref.by === 'object' ? `with ${ref.by.field} ` : ''}${shown}`);
    else if (record === undefined) problems.invalid.push(`${ref.field}: no ${target.name} ${typeof ref.by === 'object' ? `with ${ref.by.field} ` : ''}${shown} is valid now`);
    else if (ref.acyclic === true && (await leadsBack(target, store, ref.field, record, ownId))) {
      problems.cycle.push(`${ref.field}: ${shown} would make a cycle (following ${ref.field} from it leads back to this ${def.name})`);
    } else found.push(record);
  }
  return found;
}

/** The records a candidate's references name, loaded from the log (or, for a non-unique field,
 * the read model); 422 naming each field whose record is missing, not valid now, or would close a
 * cycle. Values of the wrong shape are left to the schema's 400. */
type LoadContext = { ownId: string; now: Date; options: ServiceOptions; before: JsonObject | undefined; visible?: CommandContext['visible'] };

async function loadReferences(def: ResourceDefinition, store: EventStore, candidate: unknown, context: LoadContext): Promise<Map<string, ResourceRecordLike[]>> {
  const refs = new Map<string, ResourceRecordLike[]>();
  if (def.references.length === 0 || !isPlainObject(candidate)) return refs;
  const problems: ReferenceProblems = { missing: [], cycle: [], invalid: [] };
  for (const ref of def.references) {
    refs.set(ref.field, await loadReference({ def, store, ...context }, ref, candidate, problems));
  }
  if (problems.missing.length > 0) throw referenceMissing(def.errorPrefix, [...problems.missing, ...problems.cycle, ...problems.invalid]);
  if (problems.cycle.length > 0) throw referenceCycle(def.errorPrefix, [...problems.cycle, ...problems.invalid]);
  if (problems.invalid.length > 0) throw referenceUnusable(def.errorPrefix, problems.invalid);
  return refs;
}

/** How a referring record is named in a 409: its code, else its id. */
const labelOf = (r: ResourceRecordLike): string => (typeof r.code === 'string' ? r.code : r.id);

/** Referring records a 409 names, at most, per reference (it counts them all). */
const NAMED = 5;

/** A 409's line of one reference: how many records name this one, the labels of those the caller
 * may read (`named`, of `readable` in all), and how many it may not read, never which. */
function referrerLine({ resource, reference }: Referrer, total: number, named: readonly ResourceRecordLike[], readable: number): string {
  const labels = named.slice(0, NAMED).map(labelOf);
  if (readable > NAMED) labels.push('…');
  const unreadable = total - readable;
  const said = [labels.join(', '), unreadable > 0 ? `${String(unreadable)} you may not read` : ''].filter((part) => part !== '');
  return `${resource.path}.${reference.field}: ${String(total)} ${resource.name} record(s) name it (${said.join('; ')})`;
}

/** 409 when live records name this one through a restricting reference: on a delete every such
 * reference, on a change of code those that name it by code. Every such record is counted; those
 * the caller may not read (its access rules on the referring resource) are never named. */
async function assertUnreferenced(def: ResourceDefinition, options: ServiceOptions, fields: JsonObject & { id: string }, on: 'delete' | 'code', ctx: CommandContext): Promise<void> {
  const referrers = (options.referrers ?? []).filter((r) => on === 'delete' || r.reference.by === 'code');
  const lines: string[] = [];
  for (const referrer of referrers) {
    const { resource, reference } = referrer;
    const value = reference.by === 'code' ? fields.code : fields.id;
    if (typeof value !== 'string') continue;
    const filter: FilterItem[] = [{ column: reference.field, operator: 'EQ', value }];
    const total = await needCount(options)(resource, filter);
    if (total === 0) continue;
    const scope = await ctx.readScope?.(resource.path);
    // No alternative: the caller reads nothing of that resource.
    const named = scope?.length === 0 ? [] : await needLookup(options)(resource, filter, NAMED + 1, scope);
    const readable = scope === undefined ? total : named.length <= NAMED ? named.length : await needCount(options)(resource, filter, scope);
    lines.push(referrerLine(referrer, total, named, Math.min(readable, total)));
  }
  if (lines.length > 0) throw stillReferenced(def.errorPrefix, lines);
}

/** The 409 of a unique key held by another record. */
function keyTakenError(def: ResourceDefinition, reservation: { scope: string; code: string }): Error | undefined {
  const key = keyOfScope(def, reservation.scope);
  if (key === undefined || key.name === 'code') return undefined;
  const values = key.fields.length === 1 ? [reservation.code] : (JSON.parse(reservation.code) as unknown[]);
  return keyTaken(def.errorPrefix, key.name, Object.fromEntries(key.fields.map((f, i) => [f, values[i]])));
}

export type HistoryPage = { entries: AsyncIterable<HistoryEntry>; total: number };

/** The state of a stream at a version or a time, folded a chunk at a time. */
async function stateAt(def: ResourceDefinition, store: EventStore, located: Located, at: ReadAt): Promise<RecordState> {
  const asOf = at.asOf === undefined ? undefined : Date.parse(at.asOf);
  let state = initialState();
  for await (const chunk of chunksOf(store, located.stream, at.version ?? located.version)) {
    for (const e of chunk) if (asOf === undefined || Date.parse(e.metadata.at) <= asOf) state = evolve(def, state, e);
  }
  return state;
}

const decideContextOf = (ctx: CommandContext, refs: DecideContext['refs']): DecideContext => ({
  now: ctx.now,
  actor: ctx.actor,
  refs,
  ...(ctx.admit === undefined ? {} : { admit: ctx.admit }),
  ...(ctx.privileged === undefined ? {} : { privileged: ctx.privileged }),
});

type Run = { id: string; command: ResourceCommand; ctx: CommandContext; expectedVersion: number | undefined; decideContext: DecideContext };

/** The command handler's view of a resource command on one record. */
const commandSpec = (def: ResourceDefinition, { id, command, expectedVersion, decideContext }: Omit<Run, 'ctx'>): CommandSpec<RecordState> => ({
  resource: def.errorPrefix,
  stream: streamOf(def, id),
  initial: initialState,
  evolve: (s, e) => evolve(def, s, e),
  decide: (s) => decide(def, s, command, decideContext),
  schemaVersion: SCHEMA_VERSION,
  keyTaken: (reservation) => keyTakenError(def, reservation) ?? codeTakenFallback(def, reservation.code),
  ...(expectedVersion === undefined ? {} : { expectedVersion }),
});

const writeResult = (def: ResourceDefinition, result: { state: RecordState; version: number | undefined; position: Position | undefined; written: boolean }): WriteResult => {
  const { state } = result;
  return { record: state.status === 'active' ? shown(def, state) : undefined, version: result.version ?? 0, position: result.position, written: result.written };
};

async function runCommand(def: ResourceDefinition, store: EventStore, run: Run): Promise<WriteResult> {
  return writeResult(def, await handleCommand<RecordState>(commandSpec(def, run), run.ctx, store));
}

const codeTakenFallback = (def: ResourceDefinition, code: string): Error => codeTaken(def.errorPrefix, code);

/** Times a guarded change is judged again because another write came between. */
const GUARD_ROUNDS = 16;

/** The guard's verdict on a change of a live record, decided on the record as it is now (the
 * decision is pure, so deciding it here and again when writing gives the same events): the version
 * the write must then find, and the guard's release. A record gone, at another version than the
 * caller pinned, or whose change the decision refuses, is the decision's to answer (404, 412, the
 * refusal, or the answer of an earlier request under the same Idempotency-Key). */
async function judged(def: ResourceDefinition, store: EventStore, run: Run, check: ChangeGuard): Promise<{ version: number | undefined; release?: () => void }> {
  const { state, version } = await foldStream(foldSpec(def, run.id), store);
  if (state.status !== 'active' || (run.expectedVersion !== undefined && version !== run.expectedVersion)) return { version: run.expectedVersion };
  let after: RecordState = state;
  try {
    const metadata = { actor: run.ctx.actor, at: run.ctx.now.toISOString() };
    for (const e of decide(def, state, run.command, run.decideContext).events) after = evolve(def, after, { ...e, revision: after.status === 'absent' ? 0 : after.version + 1, metadata });
  } catch {
    return { version };
  }
  const release = await check({ before: shown(def, state), after: after.status === 'active' ? shown(def, after) : undefined });
  return { version, ...(release === undefined ? {} : { release }) };
}

/** A command under the caller's guard: judged on the version it then applies to. Guarded changes of
 * one record in this process run one at a time (so they all apply, as unguarded ones do); a write
 * from another process coming between is judged again, a bounded number of times, then 409. */
async function guardedCommand(def: ResourceDefinition, store: EventStore, run: Run, check: ChangeGuard): Promise<WriteResult> {
  const stream = streamOf(def, run.id);
  const unlock = await locks.acquire([{ name: `guard:${stream}`, exclusive: true }]);
  try {
    for (let round = 1; ; round++) {
      const verdict = await judged(def, store, run, check);
      try {
        return await runCommand(def, store, { ...run, expectedVersion: verdict.version });
      } catch (error) {
        const moved = run.expectedVersion === undefined && isDomainError(error) && error.code === 'REQUEST.STALE_VERSION';
        if (!moved) throw error;
        if (round >= GUARD_ROUNDS) throw concurrentModification(def.errorPrefix, stream);
      } finally {
        verdict.release?.();
      }
    }
  } finally {
    unlock();
  }
}

/** The record that took the caller's Idempotency-Key, when the request names it (by id, or by a
 * code it had then): a retry finds it even when it is gone or renamed since, and the command
 * handler answers as the first time (or 409 for another body). */
async function recordUnderKey(def: ResourceDefinition, store: EventStore, idOrCode: string, ctx: CommandContext): Promise<string | undefined> {
  const reservation = keyReservation(ctx);
  const holder = reservation === undefined ? undefined : await store.findCode(reservation);
  const id = holder === undefined ? undefined : idIn(def.category, holder);
  if (holder === undefined || id === undefined) return undefined;
  if (isUuid(idOrCode)) return idOrCode.toLowerCase() === id ? id : undefined;
  const events = await store.readStream(holder);
  return events.some((e) => codesOf(e).includes(idOrCode)) ? id : undefined;
}

/** The live record holding a unique key's values, or 404. Read from the log's reservations, so it
 * reflects every acknowledged write. */
async function recordByKey(def: ResourceDefinition, store: EventStore, key: UniqueKey, fields: JsonObject): Promise<ResourceRecord> {
  const value = keyValue(key, fields);
  const stream = value === undefined ? undefined : await store.findCode({ scope: keyScope(def, key), code: value });
  const id = stream === undefined ? undefined : idIn(def.category, stream);
  const state = id === undefined ? initialState() : (await foldStream(foldSpec(def, id), store)).state;
  if (state.status !== 'active') throw notFound(def.errorPrefix, value ?? key.fields.join(','));
  return shown(def, state);
}

/** The id of a record being created: the client's (a UUIDv4), else one derived from the
 * Idempotency-Key (so a retry finds the same record), else a fresh one. */
function newRecordId(def: ResourceDefinition, input: unknown, ctx: CommandContext, anyUuid = false): string {
  const sent = typeof input === 'object' && input !== null ? (input as { id?: unknown }).id : undefined;
  if (typeof sent === 'string' && !isUuid(sent)) throw malformedUuid('id', sent);
  if (typeof sent === 'string' && !anyUuid && !isUuidV4(sent)) {
    throw validationFailed('A client-chosen id must be a random UUID (version 4)', [`id: ${JSON.stringify(sent)} is not a UUIDv4`]);
  }
  if (typeof sent === 'string') return sent.toLowerCase();
  return ctx.idempotencyKey === undefined ? ctx.newId() : keyedRecordId(def, ctx.actor, ctx.idempotencyKey);
}

/** The id of the record a create under an Idempotency-Key makes: the same actor and key, the same id. */
export const keyedRecordId = (def: ResourceDefinition, actor: string, idempotencyKey: string): string => uuidV5(`${def.category}|${actor}|${idempotencyKey}`);

/** The record a change names: the one that took the request's Idempotency-Key, else the live one. */
async function existingRecordId(def: ResourceDefinition, store: EventStore, idOrCode: string, ctx: CommandContext): Promise<string> {
  const underKey = await recordUnderKey(def, store, idOrCode, ctx);
  if (underKey !== undefined) return underKey;
  const state = await currentState(def, store, idOrCode, 'idOrCode');
  if (state.status !== 'active') throw notFound(def.errorPrefix, idOrCode);
  return state.id;
}

type KeyedCreate = { input: unknown; ctx: CommandContext & { idempotencyKey: string } };

/** resourceService's createMany: `create` is the service's, for what the batch cannot answer. */
async function createTogether(def: ResourceDefinition, store: EventStore, items: readonly KeyedCreate[], create: (input: unknown, ctx: CommandContext) => Promise<WriteResult>): Promise<PromiseSettledResult<WriteResult>[]> {
  const one = (item: KeyedCreate) => create(item.input, item.ctx);
  if (def.references.length > 0) return Promise.allSettled(items.map(one));
  // An id sent in the body names the record instead of the key.
  const batched = items.flatMap((item, i) => (isPlainObject(item.input) && item.input.id !== undefined ? [] : [i]));
  const commands = batched.map((i) => {
    const { input, ctx } = items[i] as KeyedCreate;
    const id = keyedRecordId(def, ctx.actor, ctx.idempotencyKey);
    const keyed = keyedContext(def, ctx, 'create', '', input);
    return { spec: commandSpec(def, { id, command: { type: 'Create', id, input }, expectedVersion: undefined, decideContext: decideContextOf(keyed, new Map()) }), ctx: keyed };
  });
  const outcomes = new Map((await handleNewStreams(commands, store)).map((outcome, n) => [batched[n] as number, outcome]));
  return Promise.allSettled(
    items.map((item, i) => {
      const outcome = outcomes.get(i) ?? { kind: 'again' };
      switch (outcome.kind) {
        case 'done':
          return Promise.resolve(writeResult(def, outcome.result));
        case 'again':
          return one(item);
        case 'failed':
          return Promise.reject(outcome.error instanceof Error ? outcome.error : new Error(String(outcome.error)));
      }
    }),
  );
}

/** The context with the hash of what the request means, when it carries an Idempotency-Key. */
const keyedContext = (def: ResourceDefinition, ctx: CommandContext, operation: string, target: string, body: unknown): CommandContext =>
  ctx.idempotencyKey === undefined ? ctx : { ...ctx, requestHash: requestHashOf({ operation, resource: def.path, target, body: meaningOf(body) }) };

/** The checks of a change against the records that name this one, before it is decided. */
function referenceChecks(def: ResourceDefinition, store: EventStore, options: ServiceOptions) {
  const referrers = options.referrers ?? [];
  const codeReferrers = referrers.some((r) => r.reference.by === 'code');
  const current = (id: string) => currentState(def, store, id, 'idOrCode');
  return {
    /** A change of code while records name this one by code is a 409. */
    async assertCodeKept(id: string, candidate: unknown, ctx: CommandContext): Promise<void> {
      if (!codeReferrers || !isPlainObject(candidate)) return;
      const state = await current(id);
      if (state.status === 'active' && state.fields.code !== candidate.code) await assertUnreferenced(def, options, { ...state.fields, id }, 'code', ctx);
    },
    /** A delete while records name this one is a 409. */
    async assertDeletable(id: string, ctx: CommandContext): Promise<void> {
      if (referrers.length === 0) return;
      const state = await current(id);
      if (state.status === 'active') await assertUnreferenced(def, options, { ...state.fields, id }, 'delete', ctx);
    },
    /** What a patch would leave, for loading its references and checking its code (the decision
     * checks it again); a resource with neither reads nothing for it. */
    async patched(id: string, patch: unknown): Promise<unknown> {
      if (def.references.length === 0 && !codeReferrers) return undefined;
      const state = await current(id);
      return state.status === 'active' && isPlainObject(patch) ? applyMergePatch(state.fields, patch) : undefined;
    },
  };
}

/** Runs a command with its references loaded (values new in the change), under the locks the
 * change needs. */
function commandRunner(def: ResourceDefinition, store: EventStore, options: ServiceOptions) {
  const current = (id: string) => currentState(def, store, id, 'idOrCode');
  const liveFields = async (id: string | undefined): Promise<JsonObject | undefined> => {
    if (id === undefined) return undefined;
    const state = await current(id);
    return state.status === 'active' ? state.fields : undefined;
  };

  const run = async (id: string, command: ResourceCommand, ctx: CommandContext, expectedVersion?: number, candidate?: unknown) => {
    const before = def.references.length === 0 || command.type === 'Create' ? undefined : await liveFields(id);
    const refs = await loadReferences(def, store, candidate, { ownId: id, now: ctx.now, options, before, ...(ctx.visible === undefined ? {} : { visible: ctx.visible }) });
    const toRun: Run = { id, command, ctx, expectedVersion, decideContext: decideContextOf(ctx, refs) };
    // A create changes no record that is there (a restore's record was deleted): nothing to guard.
    const guard = ctx.guard?.resource === def.path && command.type !== 'Create' ? ctx.guard.check : undefined;
    return guard === undefined ? runCommand(def, store, toRun) : guardedCommand(def, store, toRun, guard);
  };

  /** Work under the locks a change needs (most need none). */
  const planOf = async (change: { id?: string; candidate?: unknown; deleting?: boolean }) =>
    lockPlan(def, options, { id: change.id, candidate: change.candidate, before: await liveFields(change.id), deleting: change.deleting === true });

  /** Work under the locks the change needs, planned from the record as it is once they are held
   * (a plan made before may have changed meanwhile: then planned again). */
  const guarded = async <T>(change: { id?: string; candidate?: unknown; deleting?: boolean }, work: () => Promise<T>): Promise<T> => {
    let plan = await planOf(change);
    for (let attempt = 0; ; attempt++) {
      if (plan.length === 0) return work();
      const release = await locks.acquire(plan);
      const now = await planOf(change);
      if (!holds(plan, now)) {
        release();
        if (attempt >= 10) throw unavailable(`${def.errorPrefix}.BUSY`, 'The records this change names kept changing: try again');
        plan = [...plan, ...now];
        continue;
      }
      try {
        return await work();
      } finally {
        release();
      }
    }
  };
  return { run, guarded };
}

export function resourceService(def: ResourceDefinition, store: EventStore, options: ServiceOptions = {}) {
  const current = (idOrCode: string, by: NamedBy = 'idOrCode') => currentState(def, store, idOrCode, by);
  const checks = referenceChecks(def, store, options);

  const { run, guarded } = commandRunner(def, store, options);

  const existingId = (idOrCode: string, ctx: CommandContext) => existingRecordId(def, store, idOrCode, ctx);

  const keyed = (ctx: CommandContext, operation: string, target: string, body: unknown) => keyedContext(def, ctx, operation, target, body);

  /** `keepId`: the input's id is kept whatever its UUID version (a record exported from another
   * installation, whose id may be derived); `restore`: a record deleted under that id is made
   * again on its stream. Both for an applied diff. */
  function create(input: unknown, ctx: CommandContext, options: { keepId?: boolean; restore?: boolean } = {}): Promise<WriteResult> {
    const id = newRecordId(def, input, ctx, options.keepId === true);
    const command: ResourceCommand = { type: 'Create', id, input, ...(options.restore === true ? { restore: true } : {}) };
    return guarded({ candidate: input }, () => run(id, command, keyed(ctx, 'create', '', input), undefined, input));
  }

  return {
    definition: def,

    /** Creates of records each named by its Idempotency-Key (the id derived from it, as `create`
     * derives it when no id is sent), decided without reading anything and appended together:
     * for a batch of records that are new but for a few repeats (Kafka triggers). A record whose
     * stream is there already is answered as `create` answers it (which reads), and so is every
     * create of a resource whose records name others (references are read), or naming its id.
     * Each answers its result or the error `create` would throw, in order. */
    createMany: (items: readonly KeyedCreate[]): Promise<PromiseSettledResult<WriteResult>[]> => createTogether(def, store, items, create),

    create,

    async replace(idOrCode: string, input: unknown, ctx: CommandContext, expectedVersion?: number): Promise<WriteResult> {
      const id = await existingId(idOrCode, ctx);
      await checks.assertCodeKept(id, input, ctx);
      return guarded({ id, candidate: input }, async () => {
        await checks.assertCodeKept(id, input, ctx);
        return run(id, { type: 'Replace', input }, keyed(ctx, 'replace', id, input), expectedVersion, input);
      });
    },

    async patch(idOrCode: string, patch: unknown, ctx: CommandContext, expectedVersion?: number): Promise<WriteResult> {
      const id = await existingId(idOrCode, ctx);
      return guarded({ id, candidate: await checks.patched(id, patch) }, async () => {
        const after = await checks.patched(id, patch);
        await checks.assertCodeKept(id, after, ctx);
        return run(id, { type: 'Patch', patch }, keyed(ctx, 'patch', id, patch), expectedVersion, after);
      });
    },

    async remove(idOrCode: string, ctx: CommandContext, expectedVersion?: number): Promise<WriteResult> {
      const id = await existingId(idOrCode, ctx);
      // Once before the locks (it waits for the read models, which must not hold others up), then under them.
      await checks.assertDeletable(id, ctx);
      return guarded({ id, deleting: true }, async () => {
        await checks.assertDeletable(id, ctx);
        return run(id, { type: 'Delete' }, keyed(ctx, 'delete', id, null), expectedVersion);
      });
    },

    /** One of the resource's own commands (its `behaviour.decide`), on a live record. */
    async execute(idOrCode: string, command: OwnCommand, ctx: CommandContext, expectedVersion?: number): Promise<WriteResult> {
      const id = await existingId(idOrCode, ctx);
      return run(id, { type: 'Own', command }, keyed(ctx, command.type, id, command), expectedVersion);
    },

    getByKey: (key: UniqueKey, fields: JsonObject): Promise<ResourceRecord> => recordByKey(def, store, key, fields),

    /** The live record with its hidden parts (a password hash), for the module's own decisions and
     * reads; never sent as it is. */
    async live(idOrCode: string, codeOnly = false): Promise<LiveRecord | undefined> {
      const state = await current(idOrCode, codeOnly ? 'code' : 'idOrCode');
      return state.status === 'active' ? { id: state.id, fields: state.fields, hidden: state.hidden, version: state.version, insertedBy: state.inserted.actor } : undefined;
    },

    /** The live record, or as it was at a version or a time. */
    async get(idOrCode: string, at: ReadAt = {}): Promise<ResourceRecord> {
      if (at.version === undefined && at.asOf === undefined) {
        const state = await current(idOrCode);
        if (state.status !== 'active') throw notFound(def.errorPrefix, idOrCode);
        return shown(def, state);
      }
      const found = await locate(def, store, idOrCode);
      if (found === undefined || (at.version !== undefined && found.version < at.version)) {
        throw notFound(def.errorPrefix, at.version === undefined ? idOrCode : `${idOrCode}@${String(at.version)}`);
      }
      const state = await stateAt(def, store, found, at);
      if (state.status !== 'active') throw notFound(def.errorPrefix, idOrCode);
      return shown(def, state);
    },

    async getByCode(code: string): Promise<ResourceRecord> {
      const state = await current(code, 'code');
      if (state.status !== 'active') throw notFound(def.errorPrefix, code);
      return shown(def, state);
    },

    /** The live record with this id, never one whose code is this text (a reference by id). */
    async getById(id: string): Promise<ResourceRecord> {
      const state = await current(id, 'id');
      if (state.status !== 'active') throw notFound(def.errorPrefix, id);
      return shown(def, state);
    },

    /** One page of a record's versions, oldest first. */
    async history(idOrCode: string, page: { page: number; size: number }): Promise<HistoryPage> {
      const found = await locate(def, store, idOrCode);
      if (found === undefined) throw notFound(def.errorPrefix, idOrCode);
      const from = page.page * page.size;
      return { entries: historyOf(def, store, found.stream, from, from + page.size), total: found.version + 1 };
    },
  };
}
