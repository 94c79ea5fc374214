// Commands and single-record reads of a registry resource, over the EventStore port. Reads of one
// record fold its stream, so they reflect every acknowledged write.

import type { EventStore, Position, RecordedEvent } from '../ports.ts';
import { handleCommand, writtenUnderKey, type CommandContext } from '../shared/commandHandler.ts';
import { malformedUuid, notFound } from '../shared/errors.ts';
import { isUuid, uuidV5 } from '../shared/ids.ts';
import { diffJson, type JsonPatchOp } from '../shared/json.ts';
import type { RegistryDefinition } from './defineRegistry.ts';
import {
  SCHEMA_VERSION,
  decide,
  evolve,
  initialState,
  streamOf,
  toRecord,
  type RegistryCommand,
  type RegistryRecord,
  type RegistryState,
} from './registryDecider.ts';

export type WriteResult = { record: RegistryRecord | undefined; version: number; position: Position | undefined };

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

export type RegistryService = ReturnType<typeof registryService>;

const foldRegistry = (def: RegistryDefinition, events: readonly RecordedEvent[]): RegistryState =>
  events.reduce<RegistryState>((s, e) => evolve(def, s, e), initialState());

type Located = { id: string; events: RecordedEvent[] };

/** The stream of a record named by uuid or code; deleted records keep their stream. */
async function locate(def: RegistryDefinition, store: EventStore, idOrCode: string, codeOnly = false): Promise<Located | undefined> {
  if (!codeOnly && isUuid(idOrCode)) {
    const id = idOrCode.toLowerCase();
    const events = await store.readStream(streamOf(def, id));
    if (events.length > 0) return { id, events };
  }
  const stream = await store.findCode({ scope: def.category, code: idOrCode });
  if (stream === undefined) return undefined;
  return { id: stream.slice(def.category.length + 1), events: await store.readStream(stream) };
}

/** Every version with who, when, under which request, and what changed. */
function historyOf(def: RegistryDefinition, events: readonly RecordedEvent[]): HistoryEntry[] {
  let state = initialState();
  return events.map((e) => {
    const before = state.status === 'active' ? state.fields : {};
    state = evolve(def, state, e);
    const after = state.status === 'active' ? state.fields : {};
    const entry: HistoryEntry = { version: e.revision, type: e.type, at: e.metadata.at, actor: e.metadata.actor, data: e.data, changes: diffJson(before, after) };
    if (e.metadata.requestId !== undefined) entry.requestId = e.metadata.requestId;
    if (e.metadata.correlationId !== undefined) entry.correlationId = e.metadata.correlationId;
    return entry;
  });
}

/** The events of a stream up to a version or a time. */
function eventsAt(events: readonly RecordedEvent[], at: ReadAt): RecordedEvent[] {
  const asOf = at.asOf === undefined ? undefined : Date.parse(at.asOf);
  return events.filter(
    (e) => (at.version === undefined || e.revision <= at.version) && (asOf === undefined || Date.parse(e.metadata.at) <= asOf),
  );
}

async function runCommand(
  def: RegistryDefinition,
  store: EventStore,
  { id, command, ctx, expectedVersion }: { id: string; command: RegistryCommand; ctx: CommandContext; expectedVersion: number | undefined },
): Promise<WriteResult> {
  const result = await handleCommand<RegistryState>(
    {
      resource: def.errorPrefix,
      stream: streamOf(def, id),
      initial: initialState,
      evolve: (s, e) => evolve(def, s, e),
      decide: (s) => decide(def, s, command),
      schemaVersion: SCHEMA_VERSION,
      ...(expectedVersion === undefined ? {} : { expectedVersion }),
    },
    ctx,
    store,
  );
  const { state } = result;
  return { record: state.status === 'active' ? toRecord(state) : undefined, version: result.version ?? 0, position: result.position };
}

export function registryService(def: RegistryDefinition, store: EventStore) {
  const fold = (events: readonly RecordedEvent[]) => foldRegistry(def, events);
  const find = (idOrCode: string, codeOnly = false) => locate(def, store, idOrCode, codeOnly);

  const run = (id: string, command: RegistryCommand, ctx: CommandContext, expectedVersion?: number) =>
    runCommand(def, store, { id, command, ctx, expectedVersion });

  /** The record a change names; a retry of a change already applied under the same
   * Idempotency-Key finds its record even if it is gone since, and answers as the first time. */
  async function existingId(idOrCode: string, ctx: CommandContext): Promise<string> {
    const found = await find(idOrCode);
    if (found?.events.some((e) => writtenUnderKey(e, ctx)) === true) return found.id;
    if (found === undefined || fold(found.events).status !== 'active') throw notFound(def.errorPrefix, idOrCode);
    return found.id;
  }

  return {
    definition: def,

    create(input: unknown, ctx: CommandContext): Promise<WriteResult> {
      const sent = typeof input === 'object' && input !== null ? (input as { id?: unknown }).id : undefined;
      if (typeof sent === 'string' && !isUuid(sent)) throw malformedUuid('id', sent);
      const id =
        typeof sent === 'string'
          ? sent.toLowerCase()
          : ctx.idempotencyKey === undefined
            ? ctx.newId()
            : uuidV5(`${def.category}|${ctx.actor}|${ctx.idempotencyKey}`);
      return run(id, { type: 'Create', id, input }, ctx);
    },

    async replace(idOrCode: string, input: unknown, ctx: CommandContext, expectedVersion?: number): Promise<WriteResult> {
      return run(await existingId(idOrCode, ctx), { type: 'Replace', input }, ctx, expectedVersion);
    },

    async patch(idOrCode: string, patch: unknown, ctx: CommandContext, expectedVersion?: number): Promise<WriteResult> {
      return run(await existingId(idOrCode, ctx), { type: 'Patch', patch }, ctx, expectedVersion);
    },

    async remove(idOrCode: string, ctx: CommandContext, expectedVersion?: number): Promise<WriteResult> {
      return run(await existingId(idOrCode, ctx), { type: 'Delete' }, ctx, expectedVersion);
    },

    /** The live record, or as it was at a version or a time. */
    async get(idOrCode: string, at: ReadAt = {}): Promise<RegistryRecord> {
      const found = await find(idOrCode);
      if (found === undefined || (at.version !== undefined && found.events.length <= at.version)) {
        throw notFound(def.errorPrefix, at.version === undefined ? idOrCode : `${idOrCode}@${String(at.version)}`);
      }
      const state = fold(eventsAt(found.events, at));
      if (state.status !== 'active') throw notFound(def.errorPrefix, idOrCode);
      return toRecord(state);
    },

    async getByCode(code: string): Promise<RegistryRecord> {
      const found = await find(code, true);
      const state = found === undefined ? initialState() : fold(found.events);
      if (state.status !== 'active') throw notFound(def.errorPrefix, code);
      return toRecord(state);
    },

    async history(idOrCode: string): Promise<HistoryEntry[]> {
      const found = await find(idOrCode);
      if (found === undefined) throw notFound(def.errorPrefix, idOrCode);
      return historyOf(def, found.events);
    },
  };
}
