import { describe, expect, it } from 'vitest';
import { userType } from '../../../modules/registries/domain/userType.ts';
import { FilteringSchema, likePattern, toQuery } from '../../../domain/shared/filtering.ts';

const parse = (body: unknown) => toQuery(FilteringSchema.parse(body), userType.columns, userType.defaultSort);
const errorsOf = (body: unknown): string[] => {
  try {
    parse(body);
  } catch (e) {
    return (e as { errors: string[] }).errors;
  }
  return [];
};

describe('Filtering', () => {
  it('refuses a date-time value finer than a millisecond, which stored values never are', () => {
    expect(errorsOf({ filter: [{ column: 'auditInfo.whenEdited', operator: 'GT', value: '2020-01-01T00:00:00.123456789Z' }] })[0]).toMatch(
      /millisecond/,
    );
    expect(errorsOf({ filter: [{ column: 'auditInfo.whenEdited', operator: 'GT', value: '2020-01-01T00:00:00.123000Z' }] })).toEqual([]);
  });

  it('types values by their column and defaults the sort to code then id', () => {
    const q = parse({
      filter: [
        { column: 'auditInfo.version', operator: 'gte', value: '2' },
        { key: 'code', value: 'A' },
        { column: 'auditInfo.whenEdited', operator: 'LT', value: '2026-01-01T01:00:00+01:00' },
      ],
    });
    expect(q.conditions).toMatchObject([
      { kind: 'field', op: 'GTE', value: 2, column: { type: 'integer' } },
      { kind: 'field', op: 'EQ', value: 'A' },
      { kind: 'field', op: 'LT', value: '2026-01-01T00:00:00.000Z' },
    ]);
    expect(q.sort.map((s) => [s.column.path, s.order])).toEqual([
      ['code', 'ASC'],
      ['id', 'ASC'],
    ]);
  });

  it('accepts any path below a free-form map as an `any` column', () => {
    const q = parse({
      filter: [{ column: 'config.region.name', operator: 'EQ', value: 'north' }],
      sort: [{ column: 'name', order: 'desc' }],
    });
    expect(q.conditions[0]).toMatchObject({ column: { path: 'config.region.name', type: 'any' } });
    expect(q.sort.map((s) => [s.column.path, s.order])).toEqual([
      ['name', 'DESC'],
      ['id', 'ASC'],
    ]);
  });

  it('reports every problem at once, one line each, naming where', () => {
    expect(
      errorsOf({
        filter: [
          { column: 'nope', value: 'x' },
          { column: 'code', operator: 'REGEX', value: 'x' },
          { column: 'auditInfo.version', operator: 'EQ', value: 'two' },
          { column: 'auditInfo.version', operator: 'LIKE', value: '2' },
          { column: 'code', operator: 'IN' },
          { column: 'config.$where', value: 'x' },
          { isNested: true, nestedPath: 'regions', nestedProperty: 'regionId', value: 'x' },
        ],
        sort: [{ column: 'bogus' }],
      }),
    ).toEqual([
      'filter[0].column: unknown column "nope"',
      'filter[1].operator: unknown operator "REGEX"',
      'filter[2].value: "two" is not an integer (column auditInfo.version is integer)',
      'filter[3].operator: LIKE does not apply to integer column "auditInfo.version"',
      'filter[4].values: IN needs values',
      'filter[5].column: unknown column "config.$where"',
      'filter[6].nestedPath: unknown nested path "regions"',
      'sort[0].column: unknown column "bogus"',
    ]);
  });

  it('refuses malformed uuid and date values', () => {
    expect(errorsOf({ filter: [{ column: 'id', value: 'abc' }] })).toEqual(['filter[0].value: "abc" is not a uuid (column id is uuid)']);
    expect(errorsOf({ filter: [{ column: 'validityFrom', operator: 'GT', value: 'yesterday' }] })).toHaveLength(1);
  });

  describe('LIKE values', () => {
    const text = (t: string) => ({ kind: 'text', text: t });
    const any = { kind: 'any' };
    const one = { kind: 'one' };

    it('parse once into text, any run and one character, with \\%, \\_ and \\\\ literal', () => {
      expect(likePattern('a%%b_c%')).toEqual([text('a'), any, text('b'), one, text('c'), any]);
      expect(likePattern('100\\%')).toEqual([any, text('100%'), any]);
      expect(likePattern('a\\_b%')).toEqual([text('a_b'), any]);
      expect(likePattern('a\\\\%')).toEqual([text('a\\'), any]);
      expect(likePattern('x\\y\\')).toEqual([any, text('x\\y\\'), any]);
      expect(likePattern('')).toEqual([any]);
      expect(likePattern('%\u0000_')).toEqual([any, text('\u0000'), one]);
    });

    it('carry the parsed pattern in the condition', () => {
      const q = parse({ filter: [{ column: 'code', operator: 'NOT_LIKE', value: 'A\\_%' }] });
      expect(q.conditions[0]).toMatchObject({ op: 'NOT_LIKE', value: 'A\\_%', like: [text('A_'), any] });
    });

    it('are bounded: 255 characters and 32 unescaped wildcards, each refusal naming its item', () => {
      expect(errorsOf({ filter: [{ column: 'code', operator: 'LIKE', value: 'x'.repeat(255) }] })).toEqual([]);
      expect(
        errorsOf({
          filter: [
            { column: 'code', operator: 'EQ', value: 'x' },
            { column: 'code', operator: 'LIKE', value: 'x'.repeat(256) },
          ],
        }),
      ).toEqual(['filter[1].value: a LIKE value is at most 255 characters, not 256']);
      expect(errorsOf({ filter: [{ column: 'code', operator: 'NOT_LIKE', value: '%_'.repeat(16) }] })).toEqual([]);
      expect(errorsOf({ filter: [{ column: 'code', operator: 'NOT_LIKE', value: `${'%_'.repeat(16)}%` }] })).toEqual([
        'filter[0].value: a NOT_LIKE value has at most 32 unescaped % and _, not 33 (\\% and \\_ are literal)',
      ]);
      expect(errorsOf({ filter: [{ column: 'code', operator: 'LIKE', value: '\\%'.repeat(40) }] })).toEqual([]);
    });

    it('refuse any filter value over 1000 characters in the schema', () => {
      expect(FilteringSchema.safeParse({ filter: [{ column: 'code', value: 'x'.repeat(1000) }] }).success).toBe(true);
      const long = FilteringSchema.safeParse({ filter: [{ column: 'code', operator: 'EQ', value: 'x'.repeat(1001) }] });
      expect(long.error?.issues.map((i) => i.path)).toEqual([['filter', 0, 'value']]);
      const item = FilteringSchema.safeParse({ filter: [{ column: 'code', operator: 'IN', values: ['a', 'x'.repeat(1001)] }] });
      expect(item.error?.issues.map((i) => i.path)).toEqual([['filter', 0, 'values', 1]]);
    });
  });
});
