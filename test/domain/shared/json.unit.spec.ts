import { describe, expect, it } from 'vitest';
import { applyMergePatch, diffJson } from '../../../domain/shared/json.ts';

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
