// Export, diff and apply of the shared operation set (API.md "Diff entries"), written once for every
// resource: which field matches records, what counts as a change, the diff of an incoming data set
// against the records here, and the idempotency key of one entry's application. Pure: the records
// here come in as an async iterable (a keyset scan of the read model, in the HTTP layer).

import { z } from 'zod';
import { DomainError, validationFailed } from '../shared/errors.ts';
import { FilterItemSchema } from '../shared/filtering.ts';
import { sha256 } from '../shared/ids.ts';
import { canonicalJson, deepEqual, isPlainObject, type JsonObject } from '../shared/json.ts';
import { issueLines } from '../shared/validation.ts';
import type { ResourceDefinition } from './defineResource.ts';

export const DiffTypes = ['DIFF_TYPE_NEW', 'DIFF_TYPE_CHANGE', 'DIFF_TYPE_REMOVE'] as const;
export type DiffType = (typeof DiffTypes)[number];

export type DiffEntry = { diffType: DiffType; left?: JsonObject; right?: JsonObject };

/** Problems listed in one 400 at most (a file with a million bad entries answers a hundred lines). */
const MAX_PROBLEMS = 100;

/** The export request (SPEC.md "Export"). */
export const ExportRequestSchema = z
  .strictObject({
    entityType: z.string().min(1).max(255),
    compareField: z.string().min(1).max(255).optional(),
    listingType: z.string().max(255).optional(),
    listingProfile: z.string().max(255).optional(),
    filtering: z.array(FilterItemSchema).max(100).optional(),
  })
  .meta({
    id: 'ExportRequest',
    description: "What to export: the records the filter items select (all when none), with the caller's read access.",
  });
export type ExportRequest = z.infer<typeof ExportRequestSchema>;

/** The export object around a resource's records (SPEC.md "Export object"); `data` items are what
 * a create or replace takes (id and auditInfo included, auditInfo ignored). */
export const exportObjectSchema = (def: ResourceDefinition, item: z.ZodType = def.input) =>
  z.strictObject({
    name: z.string().max(1000).optional(),
    whenExported: z.string().max(100).optional(),
    exportedBy: z.string().max(1000).optional(),
    data: z.array(item),
    filtering: z.array(FilterItemSchema).max(100),
    entityType: z.string().max(255).optional(),
    listingType: z.string().max(255).optional(),
    listingProfile: z.string().max(255).optional(),
    compareField: z.string().max(255).optional(),
  });
export type ExportObject = { data: JsonObject[]; filtering: z.infer<typeof FilterItemSchema>[] } & JsonObject;

/** Members that never make a difference: the audit fields, and the members the API shows but
 * never stores; `id` too when records are matched by another field (ids differ between
 * installations then). */
export function comparable(def: ResourceDefinition, record: JsonObject, compareField: string): JsonObject {
  const skipped = new Set(['auditInfo', ...Object.keys(def.readOnly), ...(compareField === 'id' ? [] : ['id'])]);
  return Object.fromEntries(Object.entries(record).filter(([k, v]) => !skipped.has(k) && v !== undefined));
}

export const sameRecord = (def: ResourceDefinition, a: JsonObject, b: JsonObject, compareField: string): boolean =>
  deepEqual(comparable(def, a, compareField), comparable(def, b, compareField));

/** The fields records may be matched by: `id`, `code`, and every other scalar field of the record
 * (not an audit field); whether its values are unique is seen in the data. */
export function compareFields(def: ResourceDefinition): string[] {
  return [...new Set(['id', ...(def.hasCode ? ['code'] : []), ...scalarFields(def).filter((f) => f !== 'code' || def.hasCode)])];
}

const scalarFields = (def: ResourceDefinition): string[] =>
  [...def.columns.columns.values()].filter((c) => !c.array && c.type !== 'any' && !c.path.startsWith('auditInfo.')).map((c) => c.path);

/** A compare field of the resource's, else 400 naming them. */
export function checkCompareField(def: ResourceDefinition, field: string): string {
  if (compareFields(def).includes(field)) return field;
  throw validationFailed(`compareField ${JSON.stringify(field.slice(0, 100))} cannot match ${def.name} records`, [
    `query.compareField: id${def.hasCode ? ', code' : ''} or another single-valued field of the record (${scalarFields(def).slice(0, 30).join(', ')})`,
  ]);
}

/** A record's value of the compare field (a dotted path), as one string key; undefined when absent. */
export function keyOf(record: JsonObject, field: string): string | undefined {
  let value: unknown = record;
  for (const segment of field.split('.')) value = isPlainObject(value) && Object.hasOwn(value, segment) ? value[segment] : undefined;
  if (typeof value === 'string') return field === 'id' ? value.toLowerCase() : value;
  return typeof value === 'number' || typeof value === 'boolean' ? JSON.stringify(value) : undefined;
}

export const notUnique = (side: string, field: string, problems: readonly string[]): DomainError =>
  new DomainError(
    'DIFF.COMPARE_FIELD_NOT_UNIQUE',
    `compareField ${field} does not identify one record ${side}: choose a unique field`,
    problems.slice(0, MAX_PROBLEMS),
  );

/** The incoming records by their compare-field value; 400 when one lacks a value or two share one. */
export function indexIncoming(data: readonly JsonObject[], field: string): Map<string, { index: number; record: JsonObject }> {
  const byKey = new Map<string, { index: number; record: JsonObject }>();
  const problems: string[] = [];
  data.forEach((record, index) => {
    const key = keyOf(record, field);
    const first = key === undefined ? undefined : byKey.get(key);
    if (key === undefined) problems.push(`data[${String(index)}].${field}: missing (every record needs a value to be matched by)`);
    else if (first !== undefined)
      problems.push(`data[${String(index)}].${field}: ${key} is also the value of data[${String(first.index)}]`);
    else byKey.set(key, { index, record });
  });
  if (problems.length > 0) throw notUnique('in the incoming data', field, problems);
  return byKey;
}

/** The diff of incoming records (indexed by indexIncoming) against the records here: CHANGE and
 * REMOVE in the order the records here come, then NEW in the incoming order. Records here lacking
 * the field, or sharing a value, are a 400 (id and code are unique by construction). */
export async function diffAgainst(
  def: ResourceDefinition,
  incoming: ReadonlyMap<string, { index: number; record: JsonObject }>,
  here: AsyncIterable<JsonObject>,
  field: string,
): Promise<DiffEntry[]> {
  const entries: DiffEntry[] = [];
  const matched = new Set<string>();
  const checkUnique = field !== 'id' && field !== 'code';
  const seen = new Set<string>();
  const problems: string[] = [];
  for await (const left of here) {
    const key = keyOf(left, field);
    if (key === undefined || (checkUnique && seen.has(key))) {
      problems.push(
        `${def.path} ${String(left.id)}: ${key === undefined ? `no ${field}` : `${field} ${key} is held by another record too`}`,
      );
      continue;
    }
    if (checkUnique) seen.add(key);
    const right = incoming.get(key)?.record;
    if (right === undefined) entries.push({ diffType: 'DIFF_TYPE_REMOVE', left });
    else {
      matched.add(key);
      if (!sameRecord(def, left, right, field)) entries.push({ diffType: 'DIFF_TYPE_CHANGE', left, right });
    }
  }
  if (problems.length > 0) throw notUnique('here', field, problems);
  for (const [key, { record }] of incoming) if (!matched.has(key)) entries.push({ diffType: 'DIFF_TYPE_NEW', right: record });
  return entries;
}

/** The parsed items of an export object's `data`, or a 400 naming each failing entry by index. */
export function parseExportObject(def: ResourceDefinition, value: unknown): ExportObject {
  if (!isPlainObject(value))
    throw validationFailed('The file is not an export object', ['(file): expected a JSON object with data and filtering']);
  if (!Array.isArray(value.data))
    throw validationFailed('The file is not an export object', ['(file).data: required, an array of records']);
  const parsed = exportObjectSchema(def).safeParse(value);
  if (!parsed.success) throw validationFailed(`The file does not hold ${def.name} records as exported`, issueLines(parsed.error.issues));
  return parsed.data as ExportObject;
}

/** What one diff entry does to the record it names (`target`: its id here, or for a new record
 * its compare-field value), as the key of its application: the same entry
 * applied again over the same version of the record names the same events (a retry or a second
 * apply racing with the first writes nothing twice), while one computed later against a newer
 * version is a new change. */
export const entryKey = (
  def: ResourceDefinition,
  compareField: string,
  entry: DiffEntry,
  target: string,
  targetVersion: number | undefined,
): string =>
  `diff:${sha256(
    canonicalJson({
      resource: def.path,
      compareField,
      diffType: entry.diffType,
      target,
      right: entry.right === undefined ? null : comparable(def, entry.right, compareField),
      at: targetVersion ?? null,
    }),
  )}`;
