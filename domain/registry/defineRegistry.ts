// One descriptor per registry resource. Everything else is derived from it: the events, the
// decider, the projection, the routes, the OpenAPI schemas and the contract tests.

import { z } from 'zod';
import type { Column, ColumnCatalog, ColumnType } from '../shared/filtering.ts';
import { auditInfoSchema, uuid } from '../shared/fields.ts';

export type FieldRule = (fields: Record<string, unknown>) => string[];

export type RegistrySpec = {
  /** PascalCase resource name: the prefix of its events (`UserGroupTypeCreated`). */
  name: string;
  /** URL segment under /api/v1. */
  path: string;
  /** Fields of the record besides `id` and `auditInfo`; a strict object. */
  fields: z.ZodObject;
  /** Cross-field rules; each returns one line per violation, naming the field. */
  rules?: readonly FieldRule[];
  /** Columns searched most, beyond `code` and `name`, that get an index in every read store. */
  indexed?: readonly string[];
  description?: string;
};

export type RegistryDefinition = {
  readonly name: string;
  /** Namespace of its error codes: `USER_GROUP_TYPE.CODE_TAKEN`. */
  readonly errorPrefix: string;
  readonly path: string;
  /** Stream category: streams are `<category>-<uuid>`; also the scope of its unique codes. */
  readonly category: string;
  /** Read-model collection. */
  readonly collection: string;
  readonly fields: z.ZodObject;
  readonly rules: readonly FieldRule[];
  readonly columns: ColumnCatalog;
  readonly indexed: readonly string[];
  readonly autocomplete: readonly string[];
  readonly defaultSort: readonly string[];
  /** What the API returns: id, the fields, auditInfo. */
  readonly record: z.ZodObject;
  /** What create and replace accept: the fields plus the read-only id and auditInfo a client may echo back. */
  readonly input: z.ZodObject;
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

function walk(schema: z.core.$ZodType, path: string, into: Catalog): void {
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

export function defineRegistry(spec: RegistrySpec): RegistryDefinition {
  const category = lowerFirst(spec.name);
  const shape = spec.fields.shape;
  const searchable = ['code', 'name'].filter((k) => k in shape);
  return {
    name: spec.name,
    errorPrefix: upperSnake(spec.name),
    path: spec.path,
    category,
    collection: spec.path.replaceAll('-', '_'),
    fields: spec.fields,
    rules: spec.rules ?? [],
    columns: deriveColumns(spec.fields),
    indexed: [...new Set([...searchable, 'auditInfo.whenEdited', ...(spec.indexed ?? [])])],
    autocomplete: searchable,
    defaultSort: ['code'],
    record: z
      .strictObject({ id: uuid(), ...shape, auditInfo: auditInfoSchema })
      .meta({ id: spec.name, description: spec.description ?? spec.name }),
    input: z
      .strictObject({
        id: uuid().optional().meta({ description: 'Read-only, except that a create may choose it: a random UUID (version 4); a replace may echo the record\'s own.' }),
        ...shape,
        auditInfo: z.unknown().optional().meta({ description: 'Read-only: ignored when sent.' }),
      })
      .meta({ id: `${spec.name}Write` }),
    description: spec.description ?? spec.name,
  };
}
