// Events, state, evolve and decide of every resource, derived from its declaration. The shared
// events: Created and Replaced hold the record after the change, Patched the merge patch, Deleted
// nothing (each also carries the declaration's `carried` fields). A resource's own events (its
// `events`) and commands (its `behaviour`) fold onto the same state.

import type { CodeReservation } from '../ports.ts';
import { MAX_RECORD_BYTES } from '../shared/commandHandler.ts';
import { alreadyExists, forbidden, notFound, tooLarge, validationFailed } from '../shared/errors.ts';
import type { AuditInfo } from '../shared/fields.ts';
import { applyMergePatch, deepEqual, isPlainObject, jsonBytes, memberOf, type JsonObject } from '../shared/json.ts';
import { streamName } from '../shared/streams.ts';
import { parseOrThrow } from '../shared/validation.ts';
import {
  codeNotUuid,
  exhaustive,
  SharedEventKinds,
  type DecideContext,
  type EventSpec,
  type OwnCommand,
  type RecordParts,
  type ResourceDefinition,
  type SharedEventKind,
  type UniqueKey,
} from './defineResource.ts';

export { SharedEventKinds, type SharedEventKind };

/** Schema version of events whose type declares none. */
export const SCHEMA_VERSION = 1;

export type Stamp = { actor: string; at: string };

export type RecordState =
  | { status: 'absent' }
  | {
      status: 'active' | 'deleted';
      id: string;
      fields: JsonObject;
      /** Parts never read back (declared `hidden`): not in records, documents or history. */
      hidden: JsonObject;
      version: number;
      inserted: Stamp;
      edited: Stamp;
    };

export type ResourceRecord = JsonObject & { id: string; auditInfo: AuditInfo };

/** What evolve needs of an event: both a recorded event and a decided one plus its revision fit. */
export type EvolvableEvent = {
  type: string;
  data: Record<string, unknown>;
  revision: number;
  metadata: Stamp;
  /** Absent: the current version of its type. */
  schemaVersion?: number;
};

export type ResourceCommand =
  /** `restore`: a deleted record of this id may be made again (its stream goes on: an applied
   * diff bringing back a record deleted here keeps its id and history). */
  | { type: 'Create'; id: string; input: unknown; restore?: boolean }
  | { type: 'Replace'; input: unknown }
  | { type: 'Patch'; patch: unknown }
  | { type: 'Delete' }
  | { type: 'Own'; command: OwnCommand };

export type DecidedEvent = { type: string; data: Record<string, unknown>; schemaVersion?: number };

export type Decision = { events: DecidedEvent[]; claim: CodeReservation[]; release: CodeReservation[] };

export const initialState = (): RecordState => ({ status: 'absent' });

export const streamOf = (def: ResourceDefinition, id: string): string => streamName(def.category, id);

/** The declaration of one of the resource's event types, else undefined. */
const specOf = (def: ResourceDefinition, type: string): EventSpec | undefined =>
  Object.hasOwn(def.events, type) ? def.events[type] : undefined;

/** The kind of one of the resource's event types: a shared kind, or an own type's name after the
 * resource's (`Retried` of `JobRetried`); undefined for a type not its own. */
export function kindOf(def: ResourceDefinition, type: string): string | undefined {
  const spec = specOf(def, type);
  if (spec === undefined) return undefined;
  return spec.kind === 'Own' ? type.slice(def.name.length) : spec.kind;
}

/** The type of a resource's event of a kind (`Created` may be declared another name). */
export const eventTypeOf = (def: ResourceDefinition, kind: string): string =>
  kind === 'Created' ? def.createdEvent : `${def.name}${kind}`;

/** The schema version new events of a type are written at. */
export const schemaVersionOf = (def: ResourceDefinition, kind: string): number =>
  specOf(def, eventTypeOf(def, kind))?.schemaVersion ?? SCHEMA_VERSION;

/** An event's data in its type's current shape: older versions pass through their upcasters. */
export function upcast(def: ResourceDefinition, kind: string, data: JsonObject, from: number | undefined): JsonObject {
  const type = eventTypeOf(def, kind);
  const spec = specOf(def, type);
  const current = spec?.schemaVersion ?? SCHEMA_VERSION;
  let shaped = data;
  for (let v = from ?? current; v < current; v++) {
    const up = spec?.upcasters?.[v];
    if (up === undefined) throw new Error(`${type}: no upcaster from schema version ${String(v)}`);
    shaped = up(shaped);
  }
  return shaped;
}

export function evolve(def: ResourceDefinition, state: RecordState, event: EvolvableEvent): RecordState {
  const spec = specOf(def, event.type);
  if (spec === undefined) return state;
  const data = upcast(def, kindOf(def, event.type) ?? spec.kind, event.data, event.schemaVersion);
  const stamp = { actor: event.metadata.actor, at: event.metadata.at };
  if (spec.kind === 'Created') {
    return {
      status: 'active',
      id: String(data.id),
      fields: withoutId(data),
      hidden: {},
      version: event.revision,
      inserted: stamp,
      edited: stamp,
    };
  }
  if (state.status === 'absent') return state;
  const next = { ...state, version: event.revision, edited: stamp };
  switch (spec.kind) {
    case 'Replaced':
      return { ...next, fields: withoutId(data) };
    case 'Patched':
      return { ...next, fields: applyMergePatch(state.fields, data.patch) as JsonObject };
    case 'Deleted':
      return { ...next, status: 'deleted' };
    case 'Own': {
      if (spec.evolve === undefined) return state;
      return { ...next, ...spec.evolve({ fields: state.fields, hidden: state.hidden }, withoutCarried(def, data)) };
    }
    default:
      return exhaustive(spec.kind, 'event kind');
  }
}

function withoutId(data: Record<string, unknown>): JsonObject {
  const { id: _id, ...fields } = data;
  return fields;
}

/** Own events carry the `carried` fields beside their data; their evolve sees only the data. */
function withoutCarried(def: ResourceDefinition, data: JsonObject): JsonObject {
  if (def.carried.length === 0) return data;
  return Object.fromEntries(Object.entries(data).filter(([k]) => !def.carried.includes(k)));
}

export function toRecord(state: RecordState & { status: 'active' | 'deleted' }): ResourceRecord {
  return {
    id: state.id,
    ...state.fields,
    auditInfo: {
      version: state.version,
      whoInserted: state.inserted.actor,
      whenInserted: state.inserted.at,
      whoEdited: state.edited.actor,
      whenEdited: state.edited.at,
    },
  };
}

/** The record's state back from a stored document (projections fold onto documents, which hold
 * no hidden parts). */
export function fromRecord(doc: Record<string, unknown>): RecordState {
  const { id, auditInfo, ...fields } = doc as ResourceRecord;
  return {
    status: 'active',
    id,
    fields,
    hidden: {},
    version: auditInfo.version,
    inserted: { actor: auditInfo.whoInserted, at: auditInfo.whenInserted },
    edited: { actor: auditInfo.whoEdited, at: auditInfo.whenEdited },
  };
}

function validate(def: ResourceDefinition, ctx: DecideContext, input: unknown, before?: JsonObject, patchMode = false): JsonObject {
  const fields = parseOrThrow(def.fields, input) as JsonObject;
  const bytes = jsonBytes(fields);
  if (bytes > MAX_RECORD_BYTES) throw tooLarge(def.errorPrefix, patchMode ? 'The patched record' : 'The record', bytes, MAX_RECORD_BYTES);
  const broken = [
    ...(def.hasCode ? codeNotUuid(fields, before) : []),
    ...def.rules.flatMap((rule) => rule(fields)),
    ...def.servedRules.flatMap((rule) => rule(fields, ctx)),
  ];
  if (broken.length > 0) {
    throw validationFailed(patchMode ? 'Patched record breaks a rule' : 'Record breaks a rule', broken);
  }
  return fields;
}

/** Create and replace bodies may echo the read-only id and auditInfo of a record they read. */
function stripReadOnly(def: ResourceDefinition, input: unknown, id: string | undefined): unknown {
  if (!isPlainObject(input)) return input;
  const { id: sentId, auditInfo: _ignored, ...all } = input;
  const rest = Object.fromEntries(Object.entries(all).filter(([k]) => !Object.hasOwn(def.readOnly, k)));
  if (sentId !== undefined && id !== undefined && (typeof sentId !== 'string' || sentId.toLowerCase() !== id)) {
    throw validationFailed('The body names another record', [`id: must be ${id} or absent`]);
  }
  return rest;
}

/** The read-only members an own event stored on the record (a user's mustChangePassword): a
 * replace or patch cannot set them, and keeps them as they are. */
const storedReadOnly = (def: ResourceDefinition, fields: JsonObject): JsonObject =>
  Object.fromEntries(Object.entries(fields).filter(([k]) => Object.hasOwn(def.readOnly, k)));

const withoutReadOnly = (def: ResourceDefinition, fields: JsonObject): JsonObject =>
  Object.fromEntries(Object.entries(fields).filter(([k]) => !Object.hasOwn(def.readOnly, k)));

/** The reservation scope of a unique key: `code` keeps the category itself (the scope codes had
 * before keys were generalised, so logs written then keep their reservations). */
export const keyScope = (def: ResourceDefinition, key: UniqueKey): string =>
  key.name === 'code' ? def.category : `${def.category}.${key.name}`;

/** The reserved value of a key in a record, or undefined when a field of it is absent. */
export function keyValue(key: UniqueKey, fields: JsonObject): string | undefined {
  const raw = key.fields.map((f) => memberOf(fields, f));
  if (raw.some((v) => v === undefined || v === null)) return undefined;
  const { normalize } = key;
  const values = normalize === undefined ? raw : raw.map((v) => (typeof v === 'string' ? normalize(v) : v));
  return key.fields.length === 1 ? String(values[0]) : JSON.stringify(values);
}

/** The key a reservation scope belongs to. */
export const keyOfScope = (def: ResourceDefinition, scope: string): UniqueKey | undefined =>
  def.unique.find((k) => keyScope(def, k) === scope);

function keyMoves(def: ResourceDefinition, from: JsonObject, to: JsonObject): Pick<Decision, 'claim' | 'release'> {
  const claim: CodeReservation[] = [];
  const release: CodeReservation[] = [];
  for (const key of def.unique) {
    const before = keyValue(key, from);
    const after = keyValue(key, to);
    if (before === after) continue;
    if (after !== undefined) claim.push({ scope: keyScope(def, key), code: after });
    if (before !== undefined) release.push({ scope: keyScope(def, key), code: before });
  }
  return { claim, release };
}

/** The merge patch from one state to the next, or undefined when a merge patch cannot say it
 * (a JSON null inside a free-form map), in which case the change is recorded as a replace. */
function mergePatchBetween(from: JsonObject, to: JsonObject): JsonObject | undefined {
  // Keys come from the records' free-form maps: own-member checks only, and a Map to build on.
  const members = new Map<string, unknown>();
  for (const key of Object.keys(from)) if (!Object.hasOwn(to, key)) members.set(key, null);
  for (const [key, value] of Object.entries(to)) {
    const old = memberOf(from, key);
    if (deepEqual(old, value)) continue;
    members.set(key, isPlainObject(old) && isPlainObject(value) ? mergePatchBetween(old, value) : value);
  }
  const patch = Object.fromEntries(members);
  return deepEqual(applyMergePatch(from, patch), to) ? patch : undefined;
}

const READ_ONLY = ['id', 'auditInfo'] as const;

const NO_CONTEXT: DecideContext = { now: new Date(0), actor: 'system', refs: new Map() };

/** The fields of a record that must not change once set. */
function assertImmutable(def: ResourceDefinition, before: JsonObject, after: JsonObject): void {
  const changed = def.immutable.filter((f) => memberOf(before, f) !== undefined && !deepEqual(memberOf(before, f), memberOf(after, f)));
  if (changed.length > 0)
    throw validationFailed(
      'Some fields cannot change once set',
      changed.map((f) => `${f}: cannot change once set`),
    );
}

const carriedOf = (def: ResourceDefinition, fields: JsonObject): JsonObject =>
  Object.fromEntries(def.carried.flatMap((f) => (memberOf(fields, f) === undefined ? [] : [[f, memberOf(fields, f)]])));

/** A field with a default cannot be removed by a patch (null): the default would come back in
 * silence (a DISABLE user ENABLE again). Set another value instead. */
function assertNoDefaultRemoved(def: ResourceDefinition, patch: JsonObject): void {
  const defaulted = Object.entries(patch).filter(
    ([k, v]) => v === null && (def.fields.shape[k] as { _zod?: { def: { type: string } } } | undefined)?._zod?.def.type === 'default',
  );
  if (defaulted.length > 0) {
    throw validationFailed(
      'A patch cannot remove a field that has a default',
      defaulted.map(([k]) => `${k}: cannot be null (it has a default); set a value`),
    );
  }
}

/** `adminOnly` fields set or changed by a caller that is not the built-in admin: 403. */
function assertPrivileged(def: ResourceDefinition, before: JsonObject | undefined, after: JsonObject, ctx: DecideContext): void {
  if (ctx.privileged !== false) return;
  const changed = def.adminOnly.filter((f) => !deepEqual(memberOf(before ?? {}, f), memberOf(after, f)));
  if (changed.length > 0) throw forbidden(`Only an admin may set ${changed.join(', ')} of a ${def.name}: they grant roles`);
}

/** The record a change would leave, as access checks see it. */
function recordAfter(state: RecordState, newId: string, fields: JsonObject, ctx: DecideContext): ResourceRecord {
  const stamp = { actor: ctx.actor, at: ctx.now.toISOString() };
  if (state.status === 'absent')
    return toRecord({ status: 'active', id: newId, fields, hidden: {}, version: 0, inserted: stamp, edited: stamp });
  return toRecord({ ...state, status: 'active', fields, version: state.version + 1, edited: stamp });
}

/** A create needs a new id, or with `restore` one whose record was deleted. */
function assertCreatable(def: ResourceDefinition, state: RecordState, command: Extract<ResourceCommand, { type: 'Create' }>): void {
  if (state.status === 'absent' || (state.status === 'deleted' && command.restore === true)) return;
  throw alreadyExists(def.errorPrefix, command.id);
}

export function decide(def: ResourceDefinition, state: RecordState, command: ResourceCommand, ctx: DecideContext = NO_CONTEXT): Decision {
  const event = (kind: string, data: Record<string, unknown>): DecidedEvent => ({
    type: eventTypeOf(def, kind),
    data,
    schemaVersion: schemaVersionOf(def, kind),
  });
  const admitted = (fields: JsonObject): JsonObject => {
    ctx.admit?.(recordAfter(state, command.type === 'Create' ? command.id : '', fields, ctx));
    return fields;
  };
  const onChange = (before: JsonObject | undefined, after: JsonObject): JsonObject => {
    if (before !== undefined) assertImmutable(def, before, after);
    assertPrivileged(def, before, after, ctx);
    return admitted(def.behaviour.onChange === undefined ? after : def.behaviour.onChange(before, after, ctx));
  };
  if (command.type === 'Create') {
    assertCreatable(def, state, command);
    const fields = onChange(undefined, validate(def, ctx, stripReadOnly(def, command.input, command.id)));
    return { events: [event('Created', { id: command.id, ...fields })], ...keyMoves(def, {}, fields) };
  }
  if (state.status !== 'active') throw notFound(def.errorPrefix, state.status === 'absent' ? '' : state.id);
  switch (command.type) {
    case 'Replace': {
      const fields = onChange(state.fields, {
        ...validate(def, ctx, stripReadOnly(def, command.input, state.id), state.fields),
        ...storedReadOnly(def, state.fields),
      });
      if (deepEqual(fields, state.fields)) return { events: [], claim: [], release: [] };
      return { events: [event('Replaced', fields)], ...keyMoves(def, state.fields, fields) };
    }
    case 'Patch': {
      if (!isPlainObject(command.patch)) {
        throw validationFailed('A merge patch must be a JSON object', ['(body): expected an object']);
      }
      const readOnly = [...READ_ONLY, ...Object.keys(def.readOnly)].filter((k) => k in (command.patch as JsonObject));
      if (readOnly.length > 0) {
        throw validationFailed(
          'A patch cannot change read-only fields',
          readOnly.map((k) => `${k}: read-only`),
        );
      }
      assertNoDefaultRemoved(def, command.patch);
      const merged = applyMergePatch(withoutReadOnly(def, state.fields), command.patch) as JsonObject;
      const fields = onChange(state.fields, { ...validate(def, ctx, merged, state.fields, true), ...storedReadOnly(def, state.fields) });
      if (deepEqual(fields, state.fields)) return { events: [], claim: [], release: [] };
      const patch = mergePatchBetween(state.fields, fields);
      // A patch may say more than the state it leads to (every member it removes): then the state.
      const changed =
        patch === undefined || jsonBytes(patch) > jsonBytes(fields)
          ? event('Replaced', fields)
          : event('Patched', { patch, ...carriedOf(def, fields) });
      return { events: [changed], ...keyMoves(def, state.fields, fields) };
    }
    case 'Delete':
      return { events: [event('Deleted', carriedOf(def, state.fields))], ...keyMoves(def, state.fields, {}) };
    case 'Own': {
      if (def.behaviour.decide === undefined) throw new Error(`${def.name} has no own commands`);
      const decided = def.behaviour.decide(
        command.command,
        { id: state.id, fields: state.fields, hidden: state.hidden, version: state.version, insertedBy: state.inserted.actor },
        ctx,
      );
      let after: RecordParts = { fields: state.fields, hidden: state.hidden };
      const events = decided.map((e): DecidedEvent => {
        const spec = specOf(def, e.type);
        if (spec?.kind !== 'Own' || spec.evolve === undefined) throw new Error(`${e.type} is not an own event type of ${def.name}`);
        after = spec.evolve(after, e.data);
        return { type: e.type, data: { ...e.data, ...carriedOf(def, state.fields) }, schemaVersion: spec.schemaVersion ?? SCHEMA_VERSION };
      });
      assertImmutable(def, state.fields, after.fields);
      if (events.length > 0) admitted(after.fields);
      return { events, ...keyMoves(def, state.fields, after.fields) };
    }
    default:
      return exhaustive(command, 'resource command');
  }
}
