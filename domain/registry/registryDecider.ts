// Events, state, evolve and decide of every registry resource, derived from its descriptor.
// Event data is the state after the change for Created/Replaced and the merge patch for Patched.

import type { CodeReservation } from '../ports.ts';
import { MAX_RECORD_BYTES } from '../shared/commandHandler.ts';
import { alreadyExists, notFound, tooLarge, validationFailed } from '../shared/errors.ts';
import type { AuditInfo } from '../shared/fields.ts';
import { applyMergePatch, deepEqual, isPlainObject, jsonBytes, memberOf, type JsonObject } from '../shared/json.ts';
import { streamName } from '../shared/streams.ts';
import { parseOrThrow } from '../shared/validation.ts';
import type { RegistryDefinition } from './defineRegistry.ts';

export const RegistryEventKinds = ['Created', 'Replaced', 'Patched', 'Deleted'] as const;
export type RegistryEventKind = (typeof RegistryEventKinds)[number];

export const SCHEMA_VERSION = 1;

export type Stamp = { actor: string; at: string };

export type RegistryState =
  | { status: 'absent' }
  | {
      status: 'active' | 'deleted';
      id: string;
      fields: JsonObject;
      version: number;
      inserted: Stamp;
      edited: Stamp;
    };

export type RegistryRecord = JsonObject & { id: string; auditInfo: AuditInfo };

/** What evolve needs of an event: both a recorded event and a decided one plus its revision fit. */
export type EvolvableEvent = {
  type: string;
  data: Record<string, unknown>;
  revision: number;
  metadata: Stamp;
};

export type RegistryCommand =
  | { type: 'Create'; id: string; input: unknown }
  | { type: 'Replace'; input: unknown }
  | { type: 'Patch'; patch: unknown }
  | { type: 'Delete' };

export type DecidedEvent = { type: string; data: Record<string, unknown> };

export type Decision = {
  events: DecidedEvent[];
  claim: CodeReservation[];
  release: CodeReservation[];
};

export const initialState = (): RegistryState => ({ status: 'absent' });

export const streamOf = (def: RegistryDefinition, id: string): string => streamName(def.category, id);

export function kindOf(def: RegistryDefinition, type: string): RegistryEventKind | undefined {
  if (!type.startsWith(def.name)) return undefined;
  const rest = type.slice(def.name.length);
  return (RegistryEventKinds as readonly string[]).includes(rest) ? (rest as RegistryEventKind) : undefined;
}

export function evolve(def: RegistryDefinition, state: RegistryState, event: EvolvableEvent): RegistryState {
  const kind = kindOf(def, event.type);
  if (kind === undefined) return state;
  const stamp = { actor: event.metadata.actor, at: event.metadata.at };
  switch (kind) {
    case 'Created':
      return {
        status: 'active',
        id: String(event.data.id),
        fields: withoutId(event.data),
        version: event.revision,
        inserted: stamp,
        edited: stamp,
      };
    case 'Replaced':
      if (state.status === 'absent') return state;
      return { ...state, fields: withoutId(event.data), version: event.revision, edited: stamp };
    case 'Patched':
      if (state.status === 'absent') return state;
      return {
        ...state,
        fields: applyMergePatch(state.fields, event.data.patch) as JsonObject,
        version: event.revision,
        edited: stamp,
      };
    case 'Deleted':
      if (state.status === 'absent') return state;
      return { ...state, status: 'deleted', version: event.revision, edited: stamp };
    default: {
      const _never: never = kind;
      return _never;
    }
  }
}

function withoutId(data: Record<string, unknown>): JsonObject {
  const { id: _id, ...fields } = data;
  return fields;
}

export function toRecord(state: RegistryState & { status: 'active' | 'deleted' }): RegistryRecord {
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

/** The record's state back from a stored document (the projection folds onto documents). */
export function fromRecord(doc: Record<string, unknown>): RegistryState {
  const { id, auditInfo, ...fields } = doc as RegistryRecord;
  return {
    status: 'active',
    id,
    fields,
    version: auditInfo.version,
    inserted: { actor: auditInfo.whoInserted, at: auditInfo.whenInserted },
    edited: { actor: auditInfo.whoEdited, at: auditInfo.whenEdited },
  };
}

function validate(def: RegistryDefinition, input: unknown, patchMode = false): JsonObject {
  const fields = parseOrThrow(def.fields, input) as JsonObject;
  const bytes = jsonBytes(fields);
  if (bytes > MAX_RECORD_BYTES) throw tooLarge(def.errorPrefix, patchMode ? 'The patched record' : 'The record', bytes, MAX_RECORD_BYTES);
  const broken = def.rules.flatMap((rule) => rule(fields));
  if (broken.length > 0) {
    throw validationFailed(patchMode ? 'Patched record breaks a rule' : 'Record breaks a rule', broken);
  }
  return fields;
}

/** Create and replace bodies may echo the read-only id and auditInfo of a record they read. */
function stripReadOnly(input: unknown, id: string | undefined): unknown {
  if (!isPlainObject(input)) return input;
  const { id: sentId, auditInfo: _ignored, ...rest } = input;
  if (sentId !== undefined && id !== undefined && (typeof sentId !== 'string' || sentId.toLowerCase() !== id)) {
    throw validationFailed('The body names another record', [`id: must be ${id} or absent`]);
  }
  return rest;
}

const codeOf = (fields: JsonObject): string | undefined => (typeof fields.code === 'string' ? fields.code : undefined);

function codeMove(def: RegistryDefinition, from: JsonObject, to: JsonObject): Pick<Decision, 'claim' | 'release'> {
  const before = codeOf(from);
  const after = codeOf(to);
  if (before === after) return { claim: [], release: [] };
  return {
    claim: after === undefined ? [] : [{ scope: def.category, code: after }],
    release: before === undefined ? [] : [{ scope: def.category, code: before }],
  };
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

export function decide(def: RegistryDefinition, state: RegistryState, command: RegistryCommand): Decision {
  const event = (kind: RegistryEventKind, data: Record<string, unknown>): DecidedEvent => ({
    type: `${def.name}${kind}`,
    data,
  });
  if (command.type === 'Create') {
    if (state.status !== 'absent') throw alreadyExists(def.errorPrefix, command.id);
    const fields = validate(def, stripReadOnly(command.input, command.id));
    return { events: [event('Created', { id: command.id, ...fields })], ...codeMove(def, {}, fields) };
  }
  if (state.status !== 'active') throw notFound(def.errorPrefix, state.status === 'absent' ? '' : state.id);
  switch (command.type) {
    case 'Replace': {
      const fields = validate(def, stripReadOnly(command.input, state.id));
      if (deepEqual(fields, state.fields)) return { events: [], claim: [], release: [] };
      return { events: [event('Replaced', fields)], ...codeMove(def, state.fields, fields) };
    }
    case 'Patch': {
      if (!isPlainObject(command.patch)) {
        throw validationFailed('A merge patch must be a JSON object', ['(body): expected an object']);
      }
      const readOnly = READ_ONLY.filter((k) => k in (command.patch as JsonObject));
      if (readOnly.length > 0) {
        throw validationFailed('A patch cannot change read-only fields', readOnly.map((k) => `${k}: read-only`));
      }
      const fields = validate(def, applyMergePatch(state.fields, command.patch), true);
      if (deepEqual(fields, state.fields)) return { events: [], claim: [], release: [] };
      const patch = mergePatchBetween(state.fields, fields);
      // A patch may say more than the state it leads to (every member it removes): then the state.
      const changed = patch === undefined || jsonBytes(patch) > jsonBytes(fields) ? event('Replaced', fields) : event('Patched', { patch });
      return { events: [changed], ...codeMove(def, state.fields, fields) };
    }
    case 'Delete':
      return { events: [event('Deleted', {})], ...codeMove(def, state.fields, {}) };
    default: {
      const _never: never = command;
      return _never;
    }
  }
}
