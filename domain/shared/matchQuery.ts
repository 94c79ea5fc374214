// Conditions of a Query evaluated on one document in memory, with the semantics every read store
// gives them (filtering.ts): for a record read from the log (which no read model has folded yet)
// and for the record a write would leave, e.g. whether an access rule covers it.

import {
  booleanReading,
  numericReading,
  operandsOf,
  shapeOf,
  type Alternatives,
  type Column,
  type Condition,
  type Operands,
  type Scalar,
} from './filtering.ts';
import { likeMatcher } from './likeMatcher.ts';

/** The values at a dotted path: the elements of an array column, the one value otherwise
 * (undefined when absent). */
function valuesAt(doc: unknown, path: string, array: boolean): unknown[] {
  let at: unknown = doc;
  for (const key of path.split('.')) {
    if (typeof at !== 'object' || at === null || Array.isArray(at) || !Object.hasOwn(at, key)) return [];
    at = (at as Record<string, unknown>)[key];
  }
  if (at === undefined || at === null) return [];
  return array && Array.isArray(at) ? at : [at];
}

const compare = (a: string | number, b: string | number): number => (a < b ? -1 : a > b ? 1 : 0);

function ordered(op: 'GT' | 'GTE' | 'LT' | 'LTE', c: number): boolean {
  switch (op) {
    case 'GT':
      return c > 0;
    case 'GTE':
      return c >= 0;
    case 'LT':
      return c < 0;
    case 'LTE':
      return c <= 0;
  }
}

/** `any`: a stored string by its text, a number by the value's numeric reading, a boolean by its boolean reading. */
function anyEquals(stored: unknown, value: Scalar): boolean {
  if (typeof stored === 'string') return stored === String(value);
  if (typeof stored === 'number') return numericReading(value) === stored;
  if (typeof stored === 'boolean') return booleanReading(value) === stored;
  return false;
}

function typedEquals(column: Column, stored: unknown, value: Scalar): boolean {
  switch (column.type) {
    case 'any':
      return anyEquals(stored, value);
    case 'number':
    case 'integer':
      return typeof stored === 'number' && stored === Number(value);
    case 'boolean':
      return typeof stored === 'boolean' && stored === (value === true || value === 'true');
    case 'string':
    case 'uuid':
    case 'date-time':
      return typeof stored === 'string' && stored === String(value);
  }
}

function typedOrder(column: Column, stored: unknown, value: Scalar): number | undefined {
  if (typeof stored === 'number') {
    const n = column.type === 'any' ? numericReading(value) : Number(value);
    return n === undefined || Number.isNaN(n) ? undefined : compare(stored, n);
  }
  if (typeof stored === 'string' && column.type !== 'number' && column.type !== 'integer' && column.type !== 'boolean')
    return compare(stored, String(value));
  return undefined;
}

const LIKE_WINDOW = 4000;

function holds(
  column: Column,
  stored: unknown,
  op: 'EQ' | 'IN' | 'LIKE' | 'GT' | 'GTE' | 'LT' | 'LTE',
  operands: Operands,
  like: ((v: string) => boolean) | undefined,
): boolean {
  switch (op) {
    case 'EQ':
    case 'IN':
      return operands.values.some((v) => typedEquals(column, stored, v));
    case 'LIKE':
      return typeof stored === 'string' && like?.(stored.slice(0, LIKE_WINDOW)) === true;
    case 'GT':
    case 'GTE':
    case 'LT':
    case 'LTE': {
      const value = operands.values[0];
      const c = value === undefined ? undefined : typedOrder(column, stored, value);
      return c !== undefined && ordered(op, c);
    }
  }
}

function fieldMatches(doc: unknown, column: Column, op: Condition['op'], operands: Operands): boolean {
  const shape = shapeOf(op);
  const values = valuesAt(doc, column.path, column.array);
  if (shape.kind === 'null') return (values.length === 0) === shape.isNull;
  const like = operands.like === undefined ? undefined : likeMatcher(operands.like);
  const positive = values.some((v) => holds(column, v, shape.op, operands, like));
  return shape.kind === 'positive' ? positive : !positive;
}

export function conditionHolds(doc: unknown, c: Condition): boolean {
  const operands = operandsOf(c);
  if (c.kind === 'field') return fieldMatches(doc, c.column, c.op, operands);
  // As the stores read a nested item: some element, an object, meets the whole condition (NOT_EQ:
  // some element differs), as MongoDB's $elemMatch.
  return valuesAt(doc, c.arrayPath, true).some(
    (e) => typeof e === 'object' && e !== null && !Array.isArray(e) && fieldMatches(e, c.column, c.op, operands),
  );
}

/** Whether every condition holds. */
export const matchesAll = (doc: unknown, conditions: readonly Condition[]): boolean => conditions.every((c) => conditionHolds(doc, c));

/** Whether one of the alternatives holds entirely. */
export const matchesAny = (doc: unknown, alternatives: Alternatives): boolean => alternatives.some((all) => matchesAll(doc, all));
