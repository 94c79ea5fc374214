// JSON values, RFC 7396 merge patches and RFC 6902 diffs (the `changes` of a history entry).

export type JsonObject = Record<string, unknown>;

export const isPlainObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A member of a JSON object by a key that came with the data: `o[key]` would answer `toString`,
 * `constructor` or `__proto__` with what Object.prototype holds. */
export const memberOf = (o: JsonObject, key: string): unknown => (Object.hasOwn(o, key) ? o[key] : undefined);

/** RFC 7396: null removes a member, objects merge recursively, anything else replaces. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const base: JsonObject = isPlainObject(target) ? target : {};
  const result = new Map(Object.entries(base));
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) result.delete(key);
    else result.set(key, applyMergePatch(result.get(key), value));
  }
  return Object.fromEntries(result);
}

/** Whether a parsed JSON value holds more than `max` values (objects, arrays and scalars, itself
 * included); iterative, and it stops counting at the bound. */
export function holdsMoreValuesThan(value: unknown, max: number): boolean {
  const stack: unknown[] = [value];
  let count = 0;
  for (let v = stack.pop(); v !== undefined || stack.length > 0; v = stack.pop()) {
    if (++count > max) return true;
    if (typeof v === 'object' && v !== null) for (const child of Object.values(v)) stack.push(child);
  }
  return false;
}

/** JSON.stringify says undefined for undefined (and functions): that is JSON's null here. */
function jsonText(value: unknown): string {
  return value === undefined || typeof value === 'function' ? 'null' : JSON.stringify(value);
}

/** Size of a value's JSON text in UTF-8 bytes: what a log, a read model or a response carries. */
export const jsonBytes = (value: unknown): number => Buffer.byteLength(jsonText(value), 'utf8');

/** JSON text with every object's members sorted by key: one spelling per value. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v === undefined ? null : v)).join(',')}]`;
  if (isPlainObject(value)) {
    const members = Object.keys(value)
      .filter((k) => value[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`);
    return `{${members.join(',')}}`;
  }
  return jsonText(value);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], memberOf(b, k)));
  }
  return false;
}

export type JsonPatchOp =
  { op: 'add'; path: string; value: unknown } | { op: 'remove'; path: string } | { op: 'replace'; path: string; value: unknown };

const pointer = (segments: readonly string[]): string => segments.map((s) => '/' + s.replaceAll('~', '~0').replaceAll('/', '~1')).join('');

/** Operations that turn `from` into `to`; arrays that differ are replaced whole. */
export function diffJson(from: unknown, to: unknown, at: readonly string[] = []): JsonPatchOp[] {
  if (deepEqual(from, to)) return [];
  if (!isPlainObject(from) || !isPlainObject(to)) return [{ op: 'replace', path: pointer(at), value: to }];
  const ops: JsonPatchOp[] = [];
  for (const key of Object.keys(from)) {
    if (from[key] === undefined) continue;
    const next = memberOf(to, key);
    if (next === undefined) ops.push({ op: 'remove', path: pointer([...at, key]) });
    else ops.push(...diffJson(from[key], next, [...at, key]));
  }
  for (const key of Object.keys(to)) {
    if (to[key] !== undefined && memberOf(from, key) === undefined) ops.push({ op: 'add', path: pointer([...at, key]), value: to[key] });
  }
  return ops;
}
