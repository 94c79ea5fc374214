// One declaration per resource. Everything else is derived from it: the events, the decider, the
// projection, the routes, the OpenAPI schemas and the contract tests. A resource with rules of its
// own (status moves, own commands and events, hidden state) declares them in `behaviour`, beside
// its fields, and still gets the shared operation set.

import { z } from 'zod';
import type { Column, ColumnCatalog, ColumnType } from '../shared/filtering.ts';
import { auditInfoSchema, uuid } from '../shared/fields.ts';
import { isUuid } from '../shared/ids.ts';
import type { JsonObject } from '../shared/json.ts';
import { UUID_V4_JSON_PATTERN } from '../shared/ids.ts';

export type FieldRule = (fields: Record<string, unknown>) => string[];

/** What a rule may know beyond the record: the resources the service serves (by path); absent
 * outside a command, and then a rule that needs it checks less. */
export type RuleContext = { readonly resourceAt?: (path: string) => ResourceDefinition | undefined };

/** A cross-field rule that needs to know what the service serves (see RuleContext). */
export type ServedRule = (fields: Record<string, unknown>, context: RuleContext) => string[];

/** A set of fields no two live records may share: its own reservation (an atomic claim in the log)
 * and its own 409. `code` is the usual one; a pair such as (chunkId, name) is another. A record
 * missing one of the fields holds no value of the key. */
export type UniqueKey = {
  readonly name: string;
  readonly fields: readonly string[];
  /** The form in which values are compared (e.g. an LDAP DN case- and space-insensitively); the
   * reservation holds it, so a lookup by the key normalises the same way. Default: as stored. */
  readonly normalize?: (value: string) => string;
};

/** A field that names another record, checked (and loaded) before the decision: 422 naming the
 * field when the record is missing. A field holding an array names one record per element. */
export type Reference = {
  readonly field: string;
  readonly resource: () => ResourceDefinition;
  /** How the field names it: its id (default), its unique `code`, or the value of another field
   * that is not unique (`{ field: 'type' }`: some live record has it), found through that
   * resource's read model once it has caught up with the log's head. */
  readonly by?: 'id' | 'code' | { readonly field: string };
  /** The record named must also be usable now (within its validity window): 422 otherwise. */
  readonly valid?: (record: ResourceRecordLike, now: Date) => boolean;
  /** The field names a record of the same resource, and following it from there must never lead
   * back to the record itself (a parent group, a supervisor): 422 on a cycle. */
  readonly acyclic?: boolean;
  /** The named record cannot be deleted (nor its code changed, for a reference by code) while a
   * live record names it: 409 listing which (found through this resource's read model). For a
   * reference by id or code only. */
  readonly restrict?: boolean;
  /** The field names another record (not a kind from a registry): a caller whose reads go through
   * access rules may name only records it may read (else 422, as if missing). */
  readonly private?: boolean;
  /** Values the field takes without a record (a user's built-in roles beside access rule codes):
   * never looked up, and never naming a record of the resource (one stored under such a value
   * before that was refused is not held by them). `what` says which, in a 422 naming a value. */
  readonly builtIn?: { readonly is: (value: string) => boolean; readonly what: string };
};

/** What an event changes: the record's visible fields and its hidden ones. */
export type RecordParts = { fields: JsonObject; hidden: JsonObject };

/** The events the shared operation set writes for every resource (Created and Replaced hold the
 * record after the change, Patched the merge patch, Deleted nothing beyond the `carried` fields). */
export const SharedEventKinds = ['Created', 'Replaced', 'Patched', 'Deleted'] as const;
export type SharedEventKind = (typeof SharedEventKinds)[number];
/** A shared kind, or a resource's own event (its `evolve` says how the record changes). */
export type EventKind = SharedEventKind | 'Own';

/** One event type of a resource, under its full name (`JobProgressed`) in the resource's `events`:
 * the names stored in the log, written out where each resource declares them. */
export type EventSpec<D extends JsonObject = JsonObject> = {
  readonly kind: EventKind;
  /** What it means, for auditors and the topics' consumers (docs/events.md); a shared kind says
   * it from the resource when absent. */
  readonly meaning?: string;
  /** The shape of an own event's data at its current schema version (a shared one holds the
   * record's fields, which the resource declares). Documents and types it; events are not
   * validated against it when read (older ones may lack what it adds, which `evolve` allows for). */
  readonly data?: z.ZodType;
  /** Schema version written with new events of this type (1 when absent). */
  readonly schemaVersion?: number;
  /** `n` turns data written at schema version n into version n+1's shape: applied on every read of
   * an older event (folds, projections, history), so stored events are never rewritten. */
  readonly upcasters?: Readonly<Record<number, (data: JsonObject) => JsonObject>>;
  /** How the record changes; an own event's only. */
  readonly evolve?: (record: RecordParts, data: D) => RecordParts;
};

/** How a shared event's type may still be declared: what it means, a newer version and its upcasters. */
type SharedEventOptions = Pick<EventSpec, 'meaning' | 'schemaVersion' | 'upcasters'>;
export type SharedEventSpec<K extends SharedEventKind> = EventSpec & { readonly kind: K };
export type OwnEventSpec<D extends JsonObject> = EventSpec<D> & { readonly kind: 'Own' };

export const created = (options: SharedEventOptions = {}): SharedEventSpec<'Created'> => ({ kind: 'Created', ...options });
export const replaced = (options: SharedEventOptions = {}): SharedEventSpec<'Replaced'> => ({ kind: 'Replaced', ...options });
export const patched = (options: SharedEventOptions = {}): SharedEventSpec<'Patched'> => ({ kind: 'Patched', ...options });
export const deleted = (options: SharedEventOptions = {}): SharedEventSpec<'Deleted'> => ({ kind: 'Deleted', ...options });

/** A resource's own event type: what it means, its data and how it changes the record. */
export const ownEvent = <S extends z.ZodType<JsonObject>>(spec: {
  meaning: string;
  data: S;
  schemaVersion?: number;
  upcasters?: NonNullable<EventSpec['upcasters']>;
  evolve: (record: RecordParts, data: z.output<S>) => RecordParts;
}): OwnEventSpec<z.output<S>> => ({ kind: 'Own', ...spec });

/** A resource's event types by name. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any resource's data (evolve is bivariant)
export type EventMap = Readonly<Record<string, EventSpec<any>>>;

/** The events of a resource as a discriminated union on `type`. */
export type EventOf<E extends EventMap> = { [K in keyof E & string]: { type: K; data: DataOf<E[K]> } }[keyof E & string];
/** An event type's data (any resource's: a JSON object). */
type DataOf<S> = S extends EventSpec<infer D> ? (0 extends 1 & D ? JsonObject : D) : never;
/** The resource's own events, as its `decide` answers them. */
export type OwnEventOf<E extends EventMap> = { [K in keyof E & string]: 'Own' extends E[K]['kind'] ? EventOf<Pick<E, K>> : never }[keyof E &
  string];

/** A resource's own command: what it asks and what it carries beside its `type`. */
export type CommandDeclaration<S extends z.ZodObject = z.ZodObject> = { readonly meaning: string; readonly data: S };
export const command = <S extends z.ZodObject>(meaning: string, data: S): CommandDeclaration<S> => ({ meaning, data });
/** A resource's own commands by type. */
export type CommandMap = Readonly<Record<string, CommandDeclaration>>;
/** The commands of a resource as a discriminated union on `type`. */
export type CommandOf<C extends CommandMap> = { [K in keyof C & string]: { readonly type: K } & Members<z.output<C[K]['data']>> }[keyof C &
  string];
/** A command's members (none for an empty object, which zod types as a record of nothing). */
type Members<T> = string extends keyof T ? unknown : Readonly<T>;

/** What a decision may use besides the state: who asks and when, and the records its references
 * name (loaded before deciding, so the decision stays pure). */
export type DecideContext = {
  now: Date;
  actor: string;
  /** The referenced records by field, one per value this change sets anew (values the record
   * already held are not checked again: a reference that was valid stays so for its holder). */
  refs: ReadonlyMap<string, readonly ResourceRecordLike[]>;
  /** Applied to the record a change would leave (id, fields and auditInfo): throws to refuse it
   * (the caller's access rules; the record it starts from is checked before the command). */
  admit?: (record: JsonObject) => void;
  /** False when the caller is not the built-in admin (it may not change `adminOnly` fields);
   * absent for the service's own commands. */
  privileged?: boolean;
  /** The resources the service serves, by path (an access rule's entityName names one). */
  resourceAt?: (path: string) => ResourceDefinition | undefined;
};
export type ResourceRecordLike = JsonObject & { id: string };

/** The default of a switch over a resource's commands or events: a case left out is a compile
 * error (the value is `never` only when every case is handled). */
export function exhaustive(value: never, what: string): never {
  throw new Error(`unknown ${what} ${JSON.stringify(value)}`);
}

/** Any resource's own command: a type and whatever it carries. */
export type OwnCommand = { readonly type: string } & Readonly<Record<string, unknown>>;

/** The state an own command is decided on: the live record, and who made it (a job's starter). */
export type LiveRecord = { id: string; fields: JsonObject; hidden: JsonObject; version: number; insertedBy: string };

/** The open part of a resource's decider: its own commands, and a hook on the shared changes.
 * Everything else (the shared operation set, schemas, OpenAPI, history) is derived. */
export type Behaviour<E extends EventMap = EventMap, C extends CommandMap = CommandMap> = {
  /** Decides an own command on the live record: its own events and their data. A refusal throws a
   * DomainError (409 for a move the record does not allow). A method: a resource's typed commands
   * still fit where any resource is taken. */
  decide?(command: CommandOf<C>, record: LiveRecord, ctx: DecideContext): OwnEventOf<E>[];
  /** Every shared create, replace and patch passes here with the fields before (undefined on
   * create) and after: it answers the fields to store (e.g. an end date set when a status ends) or
   * throws (409 for a status move that is not allowed). */
  readonly onChange?: (before: JsonObject | undefined, after: JsonObject, ctx: DecideContext) => JsonObject;
};

/** The shared operation set (API.md); a resource may offer a part of it. */
export const SharedOperations = [
  'create',
  'get',
  'versions',
  'history',
  'replace',
  'patch',
  'delete',
  'byIds',
  'list',
  'search',
  'searchPage',
  'count',
  'byCode',
  'autocomplete',
  'export',
  'exportDiff',
  'import',
  'applyDiff',
] as const;
export type Operation = (typeof SharedOperations)[number];

/** The shared events a resource declares under their names, `<Name>Replaced`, `<Name>Patched` and
 * `<Name>Deleted`, beside one of kind Created (`<Name>Created`, unless what happened has a better
 * name: a notification trigger's `NotificationTriggered`). */
type SharedEventsOf<N extends string> = Readonly<
  Record<`${N}Replaced`, SharedEventSpec<'Replaced'>> &
    Record<`${N}Patched`, SharedEventSpec<'Patched'>> &
    Record<`${N}Deleted`, SharedEventSpec<'Deleted'>>
>;

/** The commands of a resource that has none. */
// eslint-disable-next-line @typescript-eslint/no-generated-empty-object-type -- an empty map is what is meant
type NoCommands = Record<never, CommandDeclaration>;

export type ResourceSpec<N extends string = string, E extends EventMap = EventMap, C extends CommandMap = CommandMap> = {
  /** PascalCase resource name: the prefix of its events (`UserGroupTypeCreated`). */
  name: N;
  /** Every event type of its streams, by the name stored in the log: the shared ones (`created()`
   * and the others) and its own (`ownEvent`). docs/events.md is generated from these. */
  events: E & SharedEventsOf<N>;
  /** Its own commands (`behaviour.decide` takes them), by type. */
  commands?: C;
  /** URL segment under /api/v1. */
  path: string;
  /** Fields of the record besides `id` and `auditInfo`; a strict object. */
  fields: z.ZodObject;
  /** Cross-field rules; each returns one line per violation, naming the field. */
  rules?: readonly FieldRule[];
  /** Cross-field rules over what the service serves, checked after `rules`. */
  servedRules?: readonly ServedRule[];
  /** Columns searched most, beyond `code` and `name`, that get an index in every read store. */
  indexed?: readonly string[];
  description?: string;
  /** Unique keys; default: `code` when the record has one, else none. */
  unique?: readonly UniqueKey[];
  /** Sort of searches that give none; default: `code` when the record has one, else creation time. */
  defaultSort?: readonly string[];
  /** The part of the shared operation set offered; default all (by-code and autocomplete only with a `code`). */
  operations?: readonly Operation[];
  references?: readonly Reference[];
  /** Fields that cannot change once set (400 when a replace or patch changes them). */
  immutable?: readonly string[];
  /** Fields every event of a record carries (the shared ones and own ones alike), so that a
   * projection folding records of another resource can route an event by them (a job step's jobId). */
  carried?: readonly string[];
  /** Parts of the state never read back (a password hash): kept out of reads, read models and the
   * data shown in history. Set only by own events. */
  hidden?: readonly string[];
  /** Fields only a privileged caller (the built-in admin) may set or change: those that grant
   * roles. 403 for anyone else. */
  adminOnly?: readonly string[];
  behaviour?: Behaviour<E, C>;
  /** Members the API shows but a client never sets: filled from elsewhere (a job's steps, from its
   * read model), or stored on the record by the resource's own events only (a user's
   * mustChangePassword), which a replace or patch keeps as it is. In the record schema with their
   * value when nothing fills them; ignored in create and replace bodies (as auditInfo is), refused
   * in a patch. */
  readOnly?: Readonly<Record<string, { schema: z.ZodType; initial: unknown }>>;
};

export type ResourceDefinition<E extends EventMap = EventMap, C extends CommandMap = CommandMap> = {
  readonly name: string;
  /** Namespace of its error codes: `USER_GROUP_TYPE.CODE_TAKEN`. */
  readonly errorPrefix: string;
  readonly path: string;
  /** Stream category: streams are `<category>-<uuid>`; also the scope of its unique codes. */
  readonly category: string;
  /** Read-model collection (and the read model's name). */
  readonly collection: string;
  readonly fields: z.ZodObject;
  readonly rules: readonly FieldRule[];
  readonly servedRules: readonly ServedRule[];
  readonly columns: ColumnCatalog;
  readonly indexed: readonly string[];
  readonly autocomplete: readonly string[];
  readonly defaultSort: readonly string[];
  readonly unique: readonly UniqueKey[];
  /** Whether records have a unique `code` (by-code route, `{idOrCode}` paths). */
  readonly hasCode: boolean;
  readonly operations: ReadonlySet<Operation>;
  readonly references: readonly Reference[];
  readonly immutable: readonly string[];
  readonly carried: readonly string[];
  readonly hidden: readonly string[];
  readonly adminOnly: readonly string[];
  /** Its event types by name, as declared. */
  readonly events: E;
  /** Its own commands by type, as declared. */
  readonly commands: C;
  /** Its decisions, for the core that runs every resource alike (typed where it is declared). */
  readonly behaviour: Behaviour;
  /** The type of the event that makes a record (`<Name>Created` unless declared otherwise). */
  readonly createdEvent: string;
  /** Read-only members beside id and auditInfo, with their value when nothing fills them. */
  readonly readOnly: Readonly<Record<string, unknown>>;
  /** What the API returns: id, the fields, auditInfo. */
  readonly record: z.ZodObject;
  /** What create and replace accept: the fields plus the read-only id and auditInfo a client may echo back. */
  readonly input: z.ZodObject;
  /** `input` as a create documents it (the same validation): `id` is the client's choice there. */
  readonly createInput: z.ZodObject;
  readonly description: string;
};

const lowerFirst = (s: string): string => s.charAt(0).toLowerCase() + s.slice(1);
const upperSnake = (s: string): string => s.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase();

type Catalog = { columns: Map<string, Column>; maps: Set<string>; nested: Map<string, ColumnCatalog> };
const emptyCatalog = (): Catalog => ({ columns: new Map(), maps: new Set(), nested: new Map() });

function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
  let s = schema;
  for (;;) {
    const def = s._zod.def;
    if (def.type === 'optional' || def.type === 'nullable' || def.type === 'default' || def.type === 'readonly') {
      s = (def as unknown as { innerType: z.core.$ZodType }).innerType;
    } else if (def.type === 'pipe') {
      s = (def as unknown as { in: z.core.$ZodType }).in;
    } else return s;
  }
}

function scalarType(schema: z.core.$ZodType): ColumnType | undefined {
  const def = schema._zod.def as { type: string; format?: string };
  switch (def.type) {
    case 'string':
      return def.format === 'uuid' ? 'uuid' : def.format === 'datetime' ? 'date-time' : 'string';
    case 'enum':
    case 'literal':
      return 'string';
    case 'number':
      return def.format?.includes('int') === true ? 'integer' : 'number';
    case 'boolean':
      return 'boolean';
    default:
      return undefined;
  }
}

/** A field may name its column type where its schema cannot tell it (a day or a date-time read
 * as one): `.meta({ 'x-column-type': 'date-time' })` (an OpenAPI extension, so it may show there). */
function declaredType(schema: z.core.$ZodType): ColumnType | undefined {
  for (let s: z.core.$ZodType | undefined = schema; s !== undefined;) {
    const declared = (z.globalRegistry.get(s) as { 'x-column-type'?: ColumnType } | undefined)?.['x-column-type'];
    if (declared !== undefined) return declared;
    const def = s._zod.def as { type: string; innerType?: z.core.$ZodType };
    s = ['optional', 'nullable', 'default', 'readonly'].includes(def.type) ? def.innerType : undefined;
  }
  return undefined;
}

function walk(schema: z.core.$ZodType, path: string, into: Catalog): void {
  const declared = declaredType(schema);
  if (declared !== undefined) {
    into.columns.set(path, { path, type: declared, array: false });
    return;
  }
  const s = unwrap(schema);
  const def = s._zod.def as { type: string; shape?: Record<string, z.core.$ZodType>; element?: z.core.$ZodType };
  const scalar = scalarType(s);
  if (scalar) {
    into.columns.set(path, { path, type: scalar, array: false });
    return;
  }
  if (def.type === 'object' && def.shape) {
    for (const [key, child] of Object.entries(def.shape)) walk(child, path === '' ? key : `${path}.${key}`, into);
    return;
  }
  if (def.type === 'array' && def.element) {
    const element = unwrap(def.element);
    const elementScalar = scalarType(element);
    if (elementScalar) into.columns.set(path, { path, type: elementScalar, array: true });
    else {
      const inner = emptyCatalog();
      walk(element, '', inner);
      into.nested.set(path, inner);
    }
    return;
  }
  // records, free JSON: any dotted path below is a column of type `any`
  into.maps.add(path);
  into.columns.set(path, { path, type: 'any', array: false });
}

export function deriveColumns(fields: z.ZodObject): ColumnCatalog {
  const catalog = emptyCatalog();
  catalog.columns.set('id', { path: 'id', type: 'uuid', array: false });
  walk(fields, '', catalog);
  for (const [key, type] of [
    ['version', 'integer'],
    ['whoInserted', 'string'],
    ['whenInserted', 'date-time'],
    ['whoEdited', 'string'],
    ['whenEdited', 'date-time'],
  ] as const) {
    catalog.columns.set(`auditInfo.${key}`, { path: `auditInfo.${key}`, type, array: false });
  }
  return catalog;
}

/** Declarations that cannot work are refused when the module loads, not at the first request. */
function checkSpec(spec: ResourceSpec): void {
  checkEvents(spec);
  for (const field of [...(spec.immutable ?? []), ...(spec.carried ?? []), ...(spec.references ?? []).map((r) => r.field)]) {
    if (!(field in spec.fields.shape)) throw new Error(`${spec.name}: no field ${field}`);
  }
}

/** Every event type is named after its resource, and each shared kind is there once. */
function checkEvents(spec: ResourceSpec): void {
  const events: [string, EventSpec][] = Object.entries(spec.events);
  for (const [type, event] of events) {
    if (!type.startsWith(spec.name) || type === spec.name)
      throw new Error(`${type}: an event type of ${spec.name} is named ${spec.name}<what happened>`);
    if (event.kind === 'Own' && (event.evolve === undefined || event.data === undefined))
      throw new Error(`${type}: an own event type needs its data and evolve`);
  }
  for (const kind of SharedEventKinds) {
    const named = events.filter(([, e]) => e.kind === kind).map(([type]) => type);
    if (named.length !== 1 || (kind !== 'Created' && named[0] !== `${spec.name}${kind}`)) {
      throw new Error(
        `${spec.name}: declares ${kind === 'Created' ? 'one event' : `${spec.name}${kind}`} of kind ${kind} (found ${named.join(', ') || 'none'})`,
      );
    }
  }
}

function offeredOperations(spec: ResourceSpec, hasCode: boolean): Set<Operation> {
  const offered = new Set<Operation>(spec.operations ?? SharedOperations);
  if (!hasCode) {
    offered.delete('byCode');
    offered.delete('autocomplete');
  }
  return offered;
}

/** A unique code never has the form of a UUID: `{idOrCode}` reads a UUID as an id, so a record
 * whose code were another record's id could be reached by neither (the one with that id would
 * answer for it), and a record later created with that id would take the code over. Judged when a
 * write sets or changes the code: a record stored with such a code before it was refused stays
 * patchable (and is still reached by `by-code`; references by id never resolve to it). */
const CODE_NOT_UUID = 'never has the form of a UUID (a UUID in a path names a record by its id)';
export const codeNotUuid = (f: Record<string, unknown>, before: Record<string, unknown> | undefined): string[] =>
  typeof f.code === 'string' && isUuid(f.code) && f.code !== before?.code ? [`code: ${JSON.stringify(f.code)} ${CODE_NOT_UUID}`] : [];

/** The code member of create and replace bodies, saying so. */
function codeInput(code: z.ZodType): z.ZodType {
  const said = (z.globalRegistry.get(code) as { description?: string } | undefined)?.description;
  return code.meta({ description: `${said === undefined ? 'unique' : `${said}; unique`}; ${CODE_NOT_UUID}: 400 otherwise` });
}

/** What create and replace accept: the fields, and the read-only members a client may echo back. */
const readOnlySchemas = (spec: ResourceSpec): Record<string, z.ZodType> =>
  Object.fromEntries(Object.entries(spec.readOnly ?? {}).map(([k, v]) => [k, v.schema]));

const lists = (spec: ResourceSpec) => ({
  references: spec.references ?? [],
  immutable: spec.immutable ?? [],
  carried: spec.carried ?? [],
  hidden: spec.hidden ?? [],
  adminOnly: spec.adminOnly ?? [],
  rules: spec.rules ?? [],
  servedRules: spec.servedRules ?? [],
});

export function defineResource<const N extends string, const E extends EventMap, const C extends CommandMap = NoCommands>(
  spec: ResourceSpec<N, E, C>,
): ResourceDefinition<E, C> {
  // The one place the declaration's own types are set aside: the core handles every resource alike.
  return buildDefinition(spec as unknown as ResourceSpec) as unknown as ResourceDefinition<E, C>;
}

function buildDefinition(spec: ResourceSpec): ResourceDefinition {
  checkSpec(spec);
  const category = lowerFirst(spec.name);
  const shape = spec.fields.shape;
  const codeKey: UniqueKey = { name: 'code', fields: ['code'] };
  const hasCode = 'code' in shape && (spec.unique ?? [codeKey]).some((k) => k.name === 'code');
  const searchable = ['code', 'name'].filter((k) => k in shape);
  const unique = spec.unique ?? (hasCode ? [codeKey] : []);
  const defaultSort = spec.defaultSort ?? (hasCode ? ['code'] : ['auditInfo.whenInserted']);
  const behaviour = spec.behaviour ?? {};
  const description = spec.description ?? spec.name;
  return {
    name: spec.name,
    errorPrefix: upperSnake(spec.name),
    path: spec.path,
    category,
    collection: spec.path.replaceAll('-', '_'),
    fields: spec.fields,
    columns: deriveColumns(spec.fields),
    indexed: [
      ...new Set([...searchable, 'auditInfo.whenEdited', ...defaultSort, ...unique.flatMap((k) => k.fields), ...(spec.indexed ?? [])]),
    ],
    autocomplete: hasCode ? searchable : [],
    defaultSort,
    unique,
    hasCode,
    operations: offeredOperations(spec, hasCode),
    ...lists(spec),
    events: spec.events,
    commands: spec.commands ?? {},
    behaviour,
    createdEvent: Object.keys(spec.events).find((type) => spec.events[type]?.kind === 'Created') ?? `${spec.name}Created`,
    readOnly: Object.fromEntries(Object.entries(spec.readOnly ?? {}).map(([k, v]) => [k, v.initial])),
    record: z
      .strictObject({ id: uuid(), ...shape, ...readOnlySchemas(spec), auditInfo: auditInfoSchema })
      .meta({ id: spec.name, description }),
    input: inputOf(spec, hasCode, 'Write'),
    createInput: inputOf(spec, hasCode, 'Create'),
    description,
  };
}

/** What a write accepts: the fields, and the read-only members a client may echo back (a replace
 * sends back what it read; `readOnly` in the document). Validated alike; documented apart, since a
 * create may choose its id. */
function inputOf(spec: ResourceSpec, hasCode: boolean, kind: 'Write' | 'Create'): z.ZodObject {
  const readOnly = { readOnly: true, description: 'Read-only: ignored when sent.' };
  const id =
    kind === 'Create'
      ? { pattern: UUID_V4_JSON_PATTERN, description: "The record's id, when the client chooses it: a random UUID (version 4)." }
      : { readOnly: true, description: "Read-only: a replace may echo the record's own id." };
  return z
    .strictObject({
      id: uuid().optional().meta(id),
      ...spec.fields.shape,
      ...(hasCode ? { code: codeInput(spec.fields.shape.code as z.ZodType) } : {}),
      ...Object.fromEntries(Object.keys(spec.readOnly ?? {}).map((k) => [k, z.unknown().optional().meta(readOnly)])),
      auditInfo: z.unknown().optional().meta(readOnly),
    })
    .meta({ id: `${spec.name}${kind}` });
}

/** A coded-value registry: the shared operation set over records with a unique `code`. */
export const defineRegistry = <const N extends string, const E extends EventMap>(
  spec: Omit<ResourceSpec<N, E, NoCommands>, 'unique' | 'operations' | 'commands'>,
): ResourceDefinition<E, NoCommands> => defineResource(spec);
