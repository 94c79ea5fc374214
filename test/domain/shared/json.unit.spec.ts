import { describe, expect, it } from 'vitest';
import { applyMergePatch, deepEqual, diffJson } from '../../../domain/shared/json.ts';

describe('merge patch (RFC 7396)', () => {
  it.each([
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
  ])('%j patched with %j is %j', (target, patch, result) => {
    expect(applyMergePatch(target, patch)).toEqual(result);
  });
});

describe('JSON diff', () => {
  it('lists add, remove and replace operations with escaped pointers', () => {
    expect(diffJson({ a: 1, b: { c: 2 }, 'x/y': 1 }, { a: 1, b: { c: 3 }, d: [1], 'x/y': 2 })).toEqual([
      { op: 'replace', path: '/b/c', value: 3 },
      { op: 'replace', path: '/x~1y', value: 2 },
      { op: 'add', path: '/d', value: [1] },
    ]);
    expect(diffJson({ a: 1 }, {})).toEqual([{ op: 'remove', path: '/a' }]);
  });
});

describe('keys named like members of Object.prototype (free-form maps)', () => {
  const proto = JSON.parse('{"__proto__": {"x": 1}}') as Record<string, unknown>;

  it('are diffed as the plain keys they are', () => {
    expect(diffJson({ m: {} }, { m: { toString: 'x' } })).toEqual([{ op: 'add', path: '/m/toString', value: 'x' }]);
    expect(diffJson({ m: { constructor: { a: 1 } } }, { m: {} })).toEqual([{ op: 'remove', path: '/m/constructor' }]);
    expect(diffJson({ m: {} }, { m: proto })).toEqual([{ op: 'add', path: '/m/__proto__', value: { x: 1 } }]);
  });

  it('are compared and merged as plain keys', () => {
    expect(deepEqual(JSON.parse('{"__proto__": {}}'), { y: {} })).toBe(false);
    expect(applyMergePatch({ m: {} }, { m: { hasOwnProperty: { a: 1 } } })).toEqual({ m: { hasOwnProperty: { a: 1 } } });
    const merged = applyMergePatch({}, proto) as Record<string, unknown>;
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(Object.hasOwn(merged, '__proto__')).toBe(true);
  });
});
