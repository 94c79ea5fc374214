// A resource's commands and single-record reads over the EventStore port: the orchestration that
// loads what the decisions of domain/resource/service.ts need (the record, the records its
// references name, the records naming it), takes the locks they plan, and runs the command through
// application/commands.ts. Reads of one record fold its stream, so they reflect every acknowledged
// write. References are loaded from the log itself (the referenced record's folded stream), not
// from a read model. A service is got from the runtime (Runtime.service), never made elsewhere, so
// that every one knows the records that restrict its deletes.

import type { RecordedEvent } from '../domain/ports.ts';
import type {
  DecideContext,
  LiveRecord,
  OwnCommand,
  Reference,
  ResourceDefinition,
  ResourceRecordLike,
  UniqueKey,
} from '../domain/resource/defineResource.ts';
import {
  decide,
  evolve,
  initialState,
  keyScope,
  keyValue,
  streamOf,
  toRecord,
  type ResourceCommand,
  type ResourceRecord,
  type RecordState,
} from '../domain/resource/decider.ts';
import {
  GUARD_ROUNDS,
  MAX_REFERENCE_CHAIN,
  NAMED,
  codesOf,
  commandSpec,
  decideContextOf,
  foldSpec,
  holds,
  isBuiltInValue,
  keyedContext,
  keyedRecordId,
  lockPlan,
  newNamedValues,
  newRecordId,
  referrerLine,
  shown,
  shownEventData,
  writeResult,
  type HistoryEntry,
  type HistoryPage,
  type KeyedCreate,
  type ReadAt,
  type ReferenceProblems,
  type Referrer,
  type Run,
  type WriteResult,
} from '../domain/resource/service.ts';
import { keyReservation, type ChangeGuard, type CommandContext } from '../domain/shared/commandHandler.ts';
import {
  concurrentModification,
  isDomainError,
  notFound,
  referenceCycle,
  referenceMissing,
  referenceUnusable,
  stillReferenced,
  unavailable,
} from '../domain/shared/errors.ts';
import type { Alternatives, FilterItem } from '../domain/shared/filtering.ts';
import { isUuid } from '../domain/shared/ids.ts';
import type { KeyedLocks } from '../domain/shared/keyedLocks.ts';
import { applyMergePatch, diffJson, isPlainObject, memberOf, type JsonObject } from '../domain/shared/json.ts';
import { idIn } from '../domain/shared/streams.ts';
import { handleCommand, handleNewStreams, type CommandLog } from './commands.ts';
import { foldStream } from './streamFold.ts';

/** A log as one runtime's resource services share it: the command log, and the locks of this
 * process that keep reference checks and their writes from interleaving (a write adding a
 * restricting reference shares the target record's lock, which a delete or a code change of it
 * takes alone; across processes the window that remains is the read model's lag: see docs/architecture.md). */
export type ResourceLog = CommandLog & { readonly locks: KeyedLocks };

export type ResourceService = ReturnType<typeof resourceService>;

type Located = { id: string; stream: string; version: number };

/** Events read a chunk at a time, and the event loop let go between chunks: a record with
 * hundreds of large versions is folded without holding every other request meanwhile. */
const CHUNK = 50;

async function* chunksOf(log: ResourceLog, stream: string, upTo = Number.POSITIVE_INFINITY): AsyncGenerator<RecordedEvent[]> {
  for (let from = 0; from <= upTo; from += CHUNK) {
    const events = await log.events.readStream(stream, { from, limit: Math.min(CHUNK, upTo - from + 1) });
    if (events.length > 0) yield events;
    if (events.length < CHUNK) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** The stream of a record named by uuid or code, and its last version (from the fold cache);
 * deleted records keep their stream. */
async function locate(def: ResourceDefinition, log: ResourceLog, idOrCode: string): Promise<Located | undefined> {
  if (isUuid(idOrCode)) {
    const id = idOrCode.toLowerCase();
    const { version } = await foldStream(foldSpec(def, id), log);
    if (version !== undefined) return { id, stream: streamOf(def, id), version };
  }
  if (!def.hasCode) return undefined;
  const stream = await log.events.findCode({ scope: def.category, code: idOrCode });
  const id = stream === undefined ? undefined : idIn(def.category, stream);
  if (stream === undefined || id === undefined) return undefined;
  const { version } = await foldStream(foldSpec(def, id), log);
  return version === undefined ? undefined : { id, stream, version };
}

/** How a text names a record: by its id or its code (a UUID as an id first), by code only, or by id
 * only. A reference by id is resolved by id only: a code shaped like a UUID (stored before such
 * codes were refused) must never stand in for a record with that id. */
type NamedBy = 'idOrCode' | 'code' | 'id';

/** The current state of a record named by uuid or code, from the cached fold of its stream. */
async function currentState(def: ResourceDefinition, log: ResourceLog, idOrCode: string, by: NamedBy): Promise<RecordState> {
  if (by !== 'code' && isUuid(idOrCode)) {
    const folded = await foldStream(foldSpec(def, idOrCode.toLowerCase()), log);
    if (folded.version !== undefined) return folded.state;
  }
  if (!def.hasCode || by === 'id') return initialState();
  const stream = await log.events.findCode({ scope: def.category, code: idOrCode });
  if (stream === undefined) return initialState();
  return (await foldStream(foldSpec(def, idIn(def.category, stream) ?? stream), log)).state;
}

/** Versions from..to-1 with who, when, under which request, and what changed; made one at a time
 * as they are sent, since a long history of large records is more than one answer may hold. */
async function* historyOf(
  def: ResourceDefinition,
  log: ResourceLog,
  stream: string,
  from: number,
  to: number,
): AsyncGenerator<HistoryEntry> {
  let state = initialState();
  for await (const chunk of chunksOf(log, stream, to - 1)) {
    for (const e of chunk) {
      const before = state.status === 'active' ? state.fields : {};
      state = evolve(def, state, e);
      if (e.revision < from) continue;
      const after = state.status === 'active' ? state.fields : {};
      const entry: HistoryEntry = {
        version: e.revision,
        type: e.type,
        at: e.metadata.at,
        actor: e.metadata.actor,
        data: shownEventData(def, e),
        changes: diffJson(before, after),
      };
      if (e.metadata.requestId !== undefined) entry.requestId = e.metadata.requestId;
      if (e.metadata.correlationId !== undefined) entry.correlationId = e.metadata.correlationId;
      yield entry;
    }
  }
}

/** Live records of a resource whose fields match filter items (and `within`, when given: what the
 * caller may read), read from its read model once it has caught up with the log's head (the HTTP
 * layer provides it over the read log). */
export type ReferenceLookup = (
  def: ResourceDefinition,
  filter: readonly FilterItem[],
  limit: number,
  within?: Alternatives,
) => Promise<ResourceRecordLike[]>;

/** How many live records ReferenceLookup would find without a limit. */
export type ReferenceCount = (def: ResourceDefinition, filter: readonly FilterItem[], within?: Alternatives) => Promise<number>;

export type ServiceOptions = {
  lookup?: ReferenceLookup;
  /** Counts the records that restrict a delete (a 409 says how many). */
  count?: ReferenceCount;
  /** The references that restrict this resource's delete (see referrersOf): always given, by the
   * runtime, which knows every resource. */
  referrers: readonly Referrer[];
  /** The resources the service serves, by path (for the decisions: an access rule's entityName). */
  resourceAt?: (path: string) => ResourceDefinition | undefined;
};

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
async function candidatesOf(
  target: ResourceDefinition,
  log: ResourceLog,
  ref: Reference,
  value: unknown,
  options: ServiceOptions,
): Promise<ResourceRecordLike[] | undefined> {
  if (typeof value !== 'string') return undefined;
  const by = ref.by ?? 'id';
  if (typeof by === 'object') return needLookup(options)(target, [{ column: by.field, operator: 'EQ', value }], 100);
  if (by === 'id' && !isUuid(value)) return undefined;
  const state = await currentState(target, log, value, by);
  return state.status === 'active' ? [toRecord(state)] : [];
}

/** The candidates the caller may read (all when its reads are not narrowed). */
async function visibleOnly(
  target: ResourceDefinition,
  candidates: ResourceRecordLike[] | undefined,
  visible: CommandContext['visible'],
): Promise<ResourceRecordLike[] | undefined> {
  if (candidates === undefined || visible === undefined) return candidates;
  const shown: ResourceRecordLike[] = [];
  for (const c of candidates) if (await visible(target.path, c)) shown.push(c);
  return shown;
}

/** Whether following an acyclic reference from a record leads back to `ownId`. */
async function leadsBack(
  target: ResourceDefinition,
  log: ResourceLog,
  field: string,
  from: ResourceRecordLike,
  ownId: string,
): Promise<boolean> {
  const seen = new Set<string>();
  let next = memberOf(from, field);
  for (let step = 0; typeof next === 'string' && isUuid(next); step++) {
    const id = next.toLowerCase();
    if (id === ownId || step >= MAX_REFERENCE_CHAIN) return true;
    if (seen.has(id)) return false;
    seen.add(id);
    const state = await currentState(target, log, id, 'id');
    if (state.status !== 'active') return false;
    next = memberOf(state.fields, field);
  }
  return false;
}

async function loadReference(
  { def, log, options, now, ownId, before, visible }: LoadContext & { def: ResourceDefinition; log: ResourceLog },
  ref: Reference,
  candidate: JsonObject,
  problems: ReferenceProblems,
): Promise<ResourceRecordLike[]> {
  const target = ref.resource();
  const found: ResourceRecordLike[] = [];
  // Values the record already held were checked when it took them: a record stays changeable
  // when what it names has since expired (a user whose type is no longer valid can be disabled).
  for (const v of newNamedValues(ref, candidate, before)) {
    const shown = JSON.stringify(v);
    if (ref.acyclic === true && typeof v === 'string' && v.toLowerCase() === ownId) {
      problems.cycle.push(`${ref.field}: a ${def.name} cannot name itself`);
      continue;
    }
    // Another record the caller names must be one it may read (a kind from a registry need not).
    const candidates = await visibleOnly(
      target,
      await candidatesOf(target, log, ref, v, options),
      ref.private === true ? visible : undefined,
    );
    if (candidates === undefined) continue;
    const usable = ref.valid === undefined ? candidates : candidates.filter((c) => ref.valid?.(c, now) === true);
    const record = usable[0];
    if (candidates.length === 0)
      problems.missing.push(
        `${ref.field}: no ${target.name} ${typeof ref.by === 'object' ? `with ${ref.by.field} ` : ''}${shown}` +
          (ref.builtIn === undefined ? '' : `, nor ${ref.builtIn.what}`),
      );
    else if (record === undefined)
      problems.invalid.push(
        `${ref.field}: no ${target.name} ${typeof ref.by === 'object' ? `with ${ref.by.field} ` : ''}${shown} is valid now`,
      );
    else if (ref.acyclic === true && (await leadsBack(target, log, ref.field, record, ownId))) {
      problems.cycle.push(`${ref.field}: ${shown} would make a cycle (following ${ref.field} from it leads back to this ${def.name})`);
    } else found.push(record);
  }
  return found;
}

/** The records a candidate's references name, loaded from the log (or, for a non-unique field,
 * the read model); 422 naming each field whose record is missing, not valid now, or would close a
 * cycle. Values of the wrong shape are left to the schema's 400. */
type LoadContext = {
  ownId: string;
  now: Date;
  options: ServiceOptions;
  before: JsonObject | undefined;
  visible?: CommandContext['visible'];
};

async function loadReferences(
  def: ResourceDefinition,
  log: ResourceLog,
  candidate: unknown,
  context: LoadContext,
): Promise<Map<string, ResourceRecordLike[]>> {
  const refs = new Map<string, ResourceRecordLike[]>();
  if (def.references.length === 0 || !isPlainObject(candidate)) return refs;
  const problems: ReferenceProblems = { missing: [], cycle: [], invalid: [] };
  for (const ref of def.references) {
    refs.set(ref.field, await loadReference({ def, log, ...context }, ref, candidate, problems));
  }
  if (problems.missing.length > 0) throw referenceMissing(def.errorPrefix, [...problems.missing, ...problems.cycle, ...problems.invalid]);
  if (problems.cycle.length > 0) throw referenceCycle(def.errorPrefix, [...problems.cycle, ...problems.invalid]);
  if (problems.invalid.length > 0) throw referenceUnusable(def.errorPrefix, problems.invalid);
  return refs;
}

/** 409 when live records name this one through a restricting reference: on a delete every such
 * reference, on a change of code those that name it by code. Every such record is counted; those
 * the caller may not read (its access rules on the referring resource) are never named. */
async function assertUnreferenced(
  def: ResourceDefinition,
  options: ServiceOptions,
  fields: JsonObject & { id: string },
  on: 'delete' | 'code',
  ctx: CommandContext,
): Promise<void> {
  const referrers = options.referrers.filter((r) => on === 'delete' || r.reference.by === 'code');
  const lines: string[] = [];
  for (const referrer of referrers) {
    const { resource, reference } = referrer;
    const value = reference.by === 'code' ? fields.code : fields.id;
    // A record stored under a built-in value (before that was refused) is not what holders of the value name.
    if (typeof value !== 'string' || isBuiltInValue(reference, value)) continue;
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

/** The state of a stream at a version or a time, folded a chunk at a time. */
async function stateAt(def: ResourceDefinition, log: ResourceLog, located: Located, at: ReadAt): Promise<RecordState> {
  const asOf = at.asOf === undefined ? undefined : Date.parse(at.asOf);
  let state = initialState();
  for await (const chunk of chunksOf(log, located.stream, at.version ?? located.version)) {
    for (const e of chunk) if (asOf === undefined || Date.parse(e.metadata.at) <= asOf) state = evolve(def, state, e);
  }
  return state;
}

async function runCommand(def: ResourceDefinition, log: ResourceLog, run: Run): Promise<WriteResult> {
  return writeResult(def, await handleCommand<RecordState>(commandSpec(def, run), run.ctx, log));
}

/** The state a command would leave a record in, decided (purely) on the state as it is; undefined
 * when the decision refuses it (deciding it again when writing refuses it alike). */
function decidedState(
  def: ResourceDefinition,
  state: RecordState,
  command: ResourceCommand,
  decideContext: DecideContext,
  ctx: CommandContext,
): RecordState | undefined {
  let after: RecordState = state;
  try {
    const metadata = { actor: ctx.actor, at: ctx.now.toISOString() };
    for (const e of decide(def, state, command, decideContext).events)
      after = evolve(def, after, { ...e, revision: after.status === 'absent' ? 0 : after.version + 1, metadata });
  } catch {
    return undefined;
  }
  return after;
}

/** The guard's verdict on a change of a live record, decided on the record as it is now (the
 * decision is pure, so deciding it here and again when writing gives the same events): the version
 * the write must then find, and the guard's release. A record gone, at another version than the
 * caller pinned, or whose change the decision refuses, is the decision's to answer (404, 412, the
 * refusal, or the answer of an earlier request under the same Idempotency-Key). */
async function judged(
  def: ResourceDefinition,
  log: ResourceLog,
  run: Run,
  check: ChangeGuard,
): Promise<{ version: number | undefined; release?: () => void }> {
  const { state, version } = await foldStream(foldSpec(def, run.id), log);
  if (state.status !== 'active' || (run.expectedVersion !== undefined && version !== run.expectedVersion))
    return { version: run.expectedVersion };
  const after = decidedState(def, state, run.command, run.decideContext, run.ctx);
  if (after === undefined) return { version };
  const release = await check({ before: shown(def, state), after: after.status === 'active' ? shown(def, after) : undefined });
  return { version, ...(release === undefined ? {} : { release }) };
}

/** A command under the caller's guard: judged on the version it then applies to. Guarded changes of
 * one record in this process run one at a time (so they all apply, as unguarded ones do); a write
 * from another process coming between is judged again, a bounded number of times, then 409. */
async function guardedCommand(def: ResourceDefinition, log: ResourceLog, run: Run, check: ChangeGuard): Promise<WriteResult> {
  const stream = streamOf(def, run.id);
  const unlock = await log.locks.acquire([{ name: `guard:${stream}`, exclusive: true }]);
  try {
    for (let round = 1; ; round++) {
      const verdict = await judged(def, log, run, check);
      try {
        return await runCommand(def, log, { ...run, expectedVersion: verdict.version });
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
async function recordUnderKey(
  def: ResourceDefinition,
  log: ResourceLog,
  idOrCode: string,
  ctx: CommandContext,
): Promise<string | undefined> {
  const reservation = keyReservation(ctx);
  const holder = reservation === undefined ? undefined : await log.events.findCode(reservation);
  const id = holder === undefined ? undefined : idIn(def.category, holder);
  if (holder === undefined || id === undefined) return undefined;
  if (isUuid(idOrCode)) return idOrCode.toLowerCase() === id ? id : undefined;
  const events = await log.events.readStream(holder);
  return events.some((e) => codesOf(e).includes(idOrCode)) ? id : undefined;
}

/** The live record holding a unique key's values, or 404. Read from the log's reservations, so it
 * reflects every acknowledged write. */
async function recordByKey(def: ResourceDefinition, log: ResourceLog, key: UniqueKey, fields: JsonObject): Promise<ResourceRecord> {
  const value = keyValue(key, fields);
  const stream = value === undefined ? undefined : await log.events.findCode({ scope: keyScope(def, key), code: value });
  const id = stream === undefined ? undefined : idIn(def.category, stream);
  const state = id === undefined ? initialState() : (await foldStream(foldSpec(def, id), log)).state;
  if (state.status !== 'active') throw notFound(def.errorPrefix, value ?? key.fields.join(','));
  return shown(def, state);
}

/** The record a change names: the one that took the request's Idempotency-Key, else the live one. */
async function existingRecordId(def: ResourceDefinition, log: ResourceLog, idOrCode: string, ctx: CommandContext): Promise<string> {
  const underKey = await recordUnderKey(def, log, idOrCode, ctx);
  if (underKey !== undefined) return underKey;
  const state = await currentState(def, log, idOrCode, 'idOrCode');
  if (state.status !== 'active') throw notFound(def.errorPrefix, idOrCode);
  return state.id;
}

/** resourceService's createMany: `create` is the service's, for what the batch cannot answer. */
async function createTogether(
  def: ResourceDefinition,
  log: ResourceLog,
  options: ServiceOptions,
  items: readonly KeyedCreate[],
  create: (input: unknown, ctx: CommandContext) => Promise<WriteResult>,
): Promise<PromiseSettledResult<WriteResult>[]> {
  const one = (item: KeyedCreate) => create(item.input, item.ctx);
  if (def.references.length > 0) return Promise.allSettled(items.map(one));
  // An id sent in the body names the record instead of the key.
  const batched = items.flatMap((item, i) => (isPlainObject(item.input) && item.input.id !== undefined ? [] : [i]));
  const commands = batched.map((i) => {
    const { input, ctx } = items[i] as KeyedCreate;
    const id = keyedRecordId(def, ctx.actor, ctx.idempotencyKey);
    const keyed = keyedContext(def, ctx, 'create', '', input);
    return {
      spec: commandSpec(def, {
        id,
        command: { type: 'Create', id, input },
        expectedVersion: undefined,
        decideContext: decideContextOf(keyed, new Map(), options.resourceAt),
      }),
      ctx: keyed,
    };
  });
  const outcomes = new Map((await handleNewStreams(commands, log.events)).map((outcome, n) => [batched[n] as number, outcome]));
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

/** The checks of a change against the records that name this one, before it is decided. */
function referenceChecks(def: ResourceDefinition, log: ResourceLog, options: ServiceOptions) {
  const referrers = options.referrers;
  const codeReferrers = referrers.some((r) => r.reference.by === 'code');
  const current = (id: string) => currentState(def, log, id, 'idOrCode');
  return {
    /** A change of code while records name this one by code is a 409. */
    async assertCodeKept(id: string, candidate: unknown, ctx: CommandContext): Promise<void> {
      if (!codeReferrers || !isPlainObject(candidate)) return;
      const state = await current(id);
      if (state.status === 'active' && state.fields.code !== candidate.code)
        await assertUnreferenced(def, options, { ...state.fields, id }, 'code', ctx);
    },
    /** A delete while records name this one is a 409. */
    async assertDeletable(id: string, ctx: CommandContext): Promise<void> {
      if (referrers.length === 0) return;
      const state = await current(id);
      if (state.status === 'active') await assertUnreferenced(def, options, { ...state.fields, id }, 'delete', ctx);
    },
    /** The fields an own command would leave, for loading the references it names anew (a user
     * joining a group), as a patch's are: decided on the record as it is, without references (the
     * decision is pure, and is decided again with them when written); undefined when the resource
     * names no records or the decision refuses it (then the write refuses it too). */
    async leftBy(id: string, command: OwnCommand, ctx: CommandContext): Promise<unknown> {
      if (def.references.length === 0) return undefined;
      const state = await current(id);
      if (state.status !== 'active') return undefined;
      const after = decidedState(def, state, { type: 'Own', command }, { now: ctx.now, actor: ctx.actor, refs: new Map() }, ctx);
      return after?.status === 'active' ? after.fields : undefined;
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
function commandRunner(def: ResourceDefinition, log: ResourceLog, options: ServiceOptions) {
  const current = (id: string) => currentState(def, log, id, 'idOrCode');
  const liveFields = async (id: string | undefined): Promise<JsonObject | undefined> => {
    if (id === undefined) return undefined;
    const state = await current(id);
    return state.status === 'active' ? state.fields : undefined;
  };

  const run = async (id: string, command: ResourceCommand, ctx: CommandContext, expectedVersion?: number, candidate?: unknown) => {
    const before = def.references.length === 0 || command.type === 'Create' ? undefined : await liveFields(id);
    const refs = await loadReferences(def, log, candidate, {
      ownId: id,
      now: ctx.now,
      options,
      before,
      ...(ctx.visible === undefined ? {} : { visible: ctx.visible }),
    });
    const toRun: Run = { id, command, ctx, expectedVersion, decideContext: decideContextOf(ctx, refs, options.resourceAt) };
    // A create changes no record that is there (a restore's record was deleted): nothing to guard.
    const guard = ctx.guard?.resource === def.path && command.type !== 'Create' ? ctx.guard.check : undefined;
    return guard === undefined ? runCommand(def, log, toRun) : guardedCommand(def, log, toRun, guard);
  };

  /** Work under the locks a change needs (most need none). */
  const planOf = async (change: { id?: string; candidate?: unknown; deleting?: boolean }) =>
    lockPlan(def, options.referrers, {
      id: change.id,
      candidate: change.candidate,
      before: await liveFields(change.id),
      deleting: change.deleting === true,
    });

  /** Work under the locks the change needs, planned from the record as it is once they are held
   * (a plan made before may have changed meanwhile: then planned again). */
  const guarded = async <T>(change: { id?: string; candidate?: unknown; deleting?: boolean }, work: () => Promise<T>): Promise<T> => {
    let plan = await planOf(change);
    for (let attempt = 0; ; attempt++) {
      if (plan.length === 0) return work();
      const release = await log.locks.acquire(plan);
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

export function resourceService(def: ResourceDefinition, log: ResourceLog, options: ServiceOptions) {
  const current = (idOrCode: string, by: NamedBy = 'idOrCode') => currentState(def, log, idOrCode, by);
  const checks = referenceChecks(def, log, options);

  const { run, guarded } = commandRunner(def, log, options);

  const existingId = (idOrCode: string, ctx: CommandContext) => existingRecordId(def, log, idOrCode, ctx);

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
    createMany: (items: readonly KeyedCreate[]): Promise<PromiseSettledResult<WriteResult>[]> =>
      createTogether(def, log, options, items, create),

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
      const context = keyed(ctx, command.type, id, command);
      if (def.references.length === 0) return run(id, { type: 'Own', command }, context, expectedVersion);
      // The records it names anew are checked, loaded for the decision and held as a patch's are.
      return guarded({ id, candidate: await checks.leftBy(id, command, ctx) }, async () =>
        run(id, { type: 'Own', command }, context, expectedVersion, await checks.leftBy(id, command, ctx)),
      );
    },

    getByKey: (key: UniqueKey, fields: JsonObject): Promise<ResourceRecord> => recordByKey(def, log, key, fields),

    /** The live record with its hidden parts (a password hash), for the module's own decisions and
     * reads; never sent as it is. */
    async live(idOrCode: string, codeOnly = false): Promise<LiveRecord | undefined> {
      const state = await current(idOrCode, codeOnly ? 'code' : 'idOrCode');
      return state.status === 'active'
        ? { id: state.id, fields: state.fields, hidden: state.hidden, version: state.version, insertedBy: state.inserted.actor }
        : undefined;
    },

    /** The live record, or as it was at a version or a time. */
    async get(idOrCode: string, at: ReadAt = {}): Promise<ResourceRecord> {
      if (at.version === undefined && at.asOf === undefined) {
        const state = await current(idOrCode);
        if (state.status !== 'active') throw notFound(def.errorPrefix, idOrCode);
        return shown(def, state);
      }
      const found = await locate(def, log, idOrCode);
      if (found === undefined || (at.version !== undefined && found.version < at.version)) {
        throw notFound(def.errorPrefix, at.version === undefined ? idOrCode : `${idOrCode}@${String(at.version)}`);
      }
      const state = await stateAt(def, log, found, at);
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
      const found = await locate(def, log, idOrCode);
      if (found === undefined) throw notFound(def.errorPrefix, idOrCode);
      const from = page.page * page.size;
      return { entries: historyOf(def, log, found.stream, from, from + page.size), total: found.version + 1 };
    },
  };
}
