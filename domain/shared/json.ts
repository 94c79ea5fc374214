// JSON values, RFC 7396 merge patches and RFC 6902 diffs (the `changes` of a history entry).

export type JsonObject = Record<string, unknown>;

export const isPlainObject = (v: unknown): v is JsonObject =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7396: null removes a member, objects merge recursively, anything else replaces. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return patch;
  const base: JsonObject = isPlainObject(target) ? target : {};
  const result = new Map(Object.entries(base));
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) result.delete(key);
    else result.set(key, applyMergePatch(base[key], value));
  }
  return Object.fromEntries(result);
}

export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  }
  if (isPlainObject(a) && isPlainObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}

export type JsonPatchOp =
  | { op: 'add'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'replace'; path: string; value: unknown };

const pointer = (segments: readonly string[]): string =>
  segments.map((s) => '/' + s.replaceAll('~', '~0').replaceAll('/', '~1')).join('');

/** Operations that turn `from` into `to`; arrays that differ are replaced whole. */
export function diffJson(from: unknown, to: unknown, at: readonly string[] = []): JsonPatchOp[] {
  if (deepEqual(from, to)) return [];
  if (!isPlainObject(from) || !isPlainObject(to)) return [{ op: 'replace', path: pointer(at), value: to }];
  const ops: JsonPatchOp[] = [];
  for (const key of Object.keys(from)) {
    if (from[key] === undefined) continue;
    if (to[key] === undefined) ops.push({ op: 'remove', path: pointer([...at, key]) });
    else ops.push(...diffJson(from[key], to[key], [...at, key]));
  }
  for (const key of Object.keys(to)) {
    if (to[key] !== undefined && from[key] === undefined) ops.push({ op: 'add', path: pointer([...at, key]), value: to[key] });
  }
  return ops;
}

/** Whether a parsed JSON value nests deeper than `max` (checked without recursion, so a hostile
 * document cannot exhaust the stack of the checker itself). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [v, depth] = item;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return true;
    for (const child of Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}
