import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scanJsonText } from '../../../domain/shared/jsonText.ts';

const scan = (text: string) => scanJsonText(text, 32);
const errors = (text: string) => scan(text).errors;

const bigLine = 'registry.big: 12345678901234567890 cannot be stored exactly (integers beyond ±9007199254740991 lose digits; use a string)';

describe('numbers', () => {
  it.each([
    '1.0',
    '1e2',
    '100',
    '0.1',
    '0.30000000000000004',
    '1.5E+3',
    '-5',
    '0',
    '0.0',
    '0e5',
    '9007199254740991',
    '-9007199254740991',
    '9007199254740992',
    '1e21',
    '1000000000000000000000',
    '123456789012345.0',
    '1.7976931348623157e308',
    '5e-324',
    '2.2250738585072014e-308',
    '0.000001',
    '1e-7',
    '1.2345678901234566e+25',
    '1.2345678901234566E25',
    '12345678901234567000',
    '0.10000000000000000000000',
    '4.35',
  ])('keeps %s', (n) => {
    expect(errors(`{"registry":{"n":${n}}}`)).toEqual([]);
    expect(errors(n)).toEqual([]);
  });

  it.each([
    ['12345678901234567890', 'integers beyond ±9007199254740991 lose digits; use a string'],
    ['9007199254740993', 'integers beyond ±9007199254740991 lose digits; use a string'],
    ['-9007199254740993', 'integers beyond ±9007199254740991 lose digits; use a string'],
    ['1e-400', 'it reads back as 0; use a string'],
    ['-1e-400', 'it reads back as 0; use a string'],
    ['1e400', 'beyond the range of a double; use a string'],
    ['-1.5e99999999', 'beyond the range of a double; use a string'],
    ['0.1000000000000000055511151231257827', 'it reads back as 0.1; use a string'],
    ['0.30000000000000001', 'it reads back as 0.3; use a string'],
    ['-0', 'it reads back as 0; use a string'],
    ['-0.0', 'it reads back as 0; use a string'],
    ['-0e5', 'it reads back as 0; use a string'],
    ['5e-325', 'it reads back as 0; use a string'],
    ['1.00000000000000000001', 'it reads back as 1; use a string'],
  ])('refuses %s (%s)', (n, why) => {
    expect(errors(`{"registry":{"n":${n}}}`)).toEqual([`registry.n: ${n} cannot be stored exactly (${why})`]);
    expect(errors(n)).toEqual([`(body): ${n} cannot be stored exactly (${why})`]);
  });

  it('names the path through arrays and nested objects', () => {
    expect(errors('{"registry":{"big":12345678901234567890}}')).toEqual([bigLine]);
    expect(errors('{"a":[1,{"b":[0, 1e400]}],"c":{"d":{"e":[[], [-0]]}}}')).toEqual([
      'a[1].b[1]: 1e400 cannot be stored exactly (beyond the range of a double; use a string)',
      'c.d.e[1][0]: -0 cannot be stored exactly (it reads back as 0; use a string)',
    ]);
    expect(errors('[[1,2],[3,{"x":[9007199254740993]}]]')).toEqual([
      '[1][1].x[0]: 9007199254740993 cannot be stored exactly (integers beyond ±9007199254740991 lose digits; use a string)',
    ]);
  });

  it('shortens a long number in the line', () => {
    const [line] = errors(`{"n":${'9'.repeat(500)}}`);
    expect(line).toBe(`n: ${'9'.repeat(40)}… cannot be stored exactly (beyond the range of a double; use a string)`);
  });

  it('finds one inexact number among thousands that need converting, by its place', () => {
    const many = Array.from({ length: 5000 }, (_, i) => String(i / 7));
    expect(errors(`{"v":[${many.join(',')}]}`)).toEqual([]);
    expect(errors(`{"v":[${many.join(',')},-0,${many.join(',')}]}`)).toEqual([
      'v[5000]: -0 cannot be stored exactly (it reads back as 0; use a string)',
    ]);
    // Spelled otherwise than JavaScript prints them, the same values are still kept.
    expect(errors(`[${many.map((n) => n.replace(/^(\d)\.(\d+)$/, '$1.$2000E0')).join(',')}]`)).toEqual([]);
  });
});

describe('duplicate keys', () => {
  it('are named with the path of their object', () => {
    expect(errors('{"code":"A","code":"B"}')).toEqual(['(body): duplicate key "code"']);
    expect(errors('{"registry":{"a":1,"b":2,"a":3}}')).toEqual(['registry: duplicate key "a"']);
    expect(errors('{"x":[{"a":1},{"a":1,"a":2}]}')).toEqual(['x[1]: duplicate key "a"']);
    expect(errors('{"a":{"a":1},"a":2}')).toEqual(['(body): duplicate key "a"']);
  });

  it('are the same key however they are escaped', () => {
    expect(errors('{"a":1,"\\u0061":2}')).toEqual(['(body): duplicate key "a"']);
    expect(errors('{"\\u0061":1,"a":2}')).toEqual(['(body): duplicate key "a"']);
    expect(errors('{"a\\"b":1,"a\\u0022b":2}')).toEqual(['(body): duplicate key "a\\"b"']);
    expect(errors('{"\\\\":1,"\\\\\\\\":2}')).toEqual([]);
  });

  it('are not keys repeated in sibling or nested objects', () => {
    expect(errors('[{"a":1,"b":2},{"a":1,"b":2},{"b":1,"a":2},{"a":{"a":{"a":1}},"b":{"a":1}}]')).toEqual([]);
  });

  it("are found after the keys stop following the previous object's, and in large objects", () => {
    expect(errors('[{"a":1,"b":2,"c":3},{"a":1,"b":2,"a":3},{"a":1,"x":2,"b":3,"x":4}]')).toEqual([
      '[1]: duplicate key "a"',
      '[2]: duplicate key "x"',
    ]);
    const keys = Array.from({ length: 40 }, (_, i) => `"k${String(i)}":${String(i)}`);
    expect(errors(`[{${keys.join(',')}},{${keys.join(',')},"k3":0},{${[...keys].reverse().join(',')},"k39":0}]`)).toEqual([
      '[1]: duplicate key "k3"',
      '[2]: duplicate key "k39"',
    ]);
  });

  it('stop at 20 lines', () => {
    const body = `{${Array.from({ length: 100 }, () => '"a":1').join(',')}}`;
    expect(errors(body)).toHaveLength(20);
  });
});

describe('strings', () => {
  it('are skipped whatever they contain', () => {
    expect(
      errors('{"s":"{\\"a\\":1e400,\\"a\\":2}","t":"[1,2,-0]","u":"\\\\","v":"\\\\\\"}","w":"e-0 12345678901234567890","a":1}'),
    ).toEqual([]);
    expect(errors('["\\\\", -0]')).toEqual(['[1]: -0 cannot be stored exactly (it reads back as 0; use a string)']);
    expect(errors('{"{\\"a\\":1}":1,"[":2,"]":3,",":4,":":5}')).toEqual([]);
  });
});

describe('nesting', () => {
  const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
  it('allows 32 levels and refuses 33, once', () => {
    expect(scan(nested(32))).toEqual({ errors: [], tooDeep: false, tooMany: false });
    expect(scan(nested(33))).toEqual({ errors: ['(body): at most 32 levels of nesting'], tooDeep: true, tooMany: false });
    expect(scan(`{"registry":${nested(5000)}}`)).toEqual({
      errors: ['(body): at most 32 levels of nesting'],
      tooDeep: true,
      tooMany: false,
    });
  });

  it('counts levels of objects and arrays alike', () => {
    let deep = '1';
    for (let i = 0; i < 31; i++) deep = i % 2 === 0 ? `{"n":${deep}}` : `[${deep}]`;
    expect(scan(deep).tooDeep).toBe(false);
    expect(scan(`[${deep}]`).tooDeep).toBe(false);
    expect(scan(`[[${deep}]]`).tooDeep).toBe(true);
  });
});

describe('texts the parser refuses', () => {
  it.each([
    '',
    '{"a":',
    '"unterminated',
    '[1,2',
    '{"a":1}}}}',
    '-',
    '1.',
    '1e',
    '{"a\\u00":1,"a\\u00":2}',
    '[--1]',
    '{"a":+1}',
    '{"a" "b"}',
    '\\',
    ']]][[[',
  ])('end without throwing: %j', (text) => {
    expect(() => scan(text)).not.toThrow();
  });

  it('answers for a character it does not follow, so a text it misread is never let through', () => {
    expect(errors('{"a":+1}')).toEqual(['(body): unexpected character at offset 5']);
  });

  it("skip a leading byte order mark as fastify's parser does", () => {
    expect(errors('\uFEFF{"n":-0}')).toEqual(['n: -0 cannot be stored exactly (it reads back as 0; use a string)']);
  });
});

const depthOf = (v: unknown): number => (typeof v === 'object' && v !== null ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0);

/** Every character as a \u escape: another spelling of the same key. */
const escapeAll = (key: string): string =>
  Array.from({ length: key.length }, (_, i) => `\\u${key.charCodeAt(i).toString(16).padStart(4, '0')}`).join('');

describe('properties', () => {
  it('report nothing for any JSON text JavaScript writes (its numbers print exactly), however indented', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.constantFrom(undefined, 2, '\t'), (value, indent) => {
        const text = JSON.stringify(value, null, indent);
        expect(scan(text)).toEqual({ errors: [], tooDeep: depthOf(value) > 32, tooMany: false });
      }),
    );
  });

  it("keep every spelling of a double's printed value, and refuse them all for -0", () => {
    const moreZeros = (s: string) => (s.includes('.') ? s.replace('e', '0e') : s.replace('e', '.0e'));
    fc.assert(
      fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (d) => {
        const sign = d < 0 || Object.is(d, -0) ? '-' : '';
        const exponential = Math.abs(d).toExponential();
        for (const spelling of [String(Math.abs(d)), exponential, exponential.toUpperCase(), moreZeros(exponential)]) {
          const written = sign + spelling;
          expect(errors(`[${written}]`)).toEqual(
            Object.is(d, -0) ? [`[0]: ${written} cannot be stored exactly (it reads back as 0; use a string)`] : [],
          );
        }
      }),
    );
  });

  it('refuse exactly the integers that do not print back with the digits written', () => {
    // JavaScript prints integers from 1e21 on in exponent form, with the shortest digits.
    const digitsOf = (printed: string): string => {
      const [mantissa = '', exponent] = printed.replace('-', '').split('e');
      if (exponent === undefined) return mantissa;
      const [whole = '', fraction = ''] = mantissa.split('.');
      return whole + fraction + '0'.repeat(Number(exponent) - fraction.length);
    };
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }), (n) => {
        const exact = digitsOf(String(Number(n))) === String(n < 0n ? -n : n);
        const found = errors(`{"n":${String(n)}}`);
        if (exact) expect(found).toEqual([]);
        else
          expect(found).toEqual([`n: ${String(n)} cannot be stored exactly (integers beyond ±9007199254740991 lose digits; use a string)`]);
      }),
    );
  });

  it('refuse a number exactly when its decimal value differs from what JavaScript prints back', () => {
    // The reference: sign, digits without trailing zeros and exponent, in exact integer arithmetic.
    const value = (s: string): string | undefined => {
      const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(s);
      if (m === null) return undefined;
      const [, sign = '', whole = '', fraction = '', exponent = '0'] = m;
      let digits = BigInt(whole + fraction);
      let power = Number(exponent) - fraction.length;
      if (digits === 0n) return `${sign}0`;
      while (digits % 10n === 0n) {
        digits /= 10n;
        power++;
      }
      return `${sign}${String(digits)}e${String(power)}`;
    };
    const token = fc
      .tuple(
        fc.constantFrom('', '-'),
        fc.stringMatching(/^(0|[1-9]\d{0,19})$/),
        fc.option(fc.stringMatching(/^\d{1,25}$/), { nil: undefined }),
        fc.option(fc.tuple(fc.constantFrom('e', 'E', 'e+', 'e-', 'E-'), fc.nat({ max: 400 })), { nil: undefined }),
      )
      .map(
        ([sign, whole, fraction, exponent]) =>
          `${sign}${whole}${fraction === undefined ? '' : `.${fraction}`}${exponent === undefined ? '' : exponent.join('')}`,
      );
    fc.assert(
      fc.property(fc.array(token, { minLength: 1, maxLength: 30 }), (tokens) => {
        const refused = tokens.flatMap((t, i) => (value(t) === value(String(Number(t))) ? [] : [`[${String(i)}]: ${t}`]));
        expect(errors(`[${tokens.join(',')}]`).map((line) => line.replace(/ cannot be stored exactly .*$/, ''))).toEqual(
          refused.slice(0, 20),
        );
      }),
      { numRuns: 500 },
    );
  });

  it('report a key given twice, under the path of its object, however the second one is spelled', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 }), { minKeys: 1, maxKeys: 20 }),
        fc.nat(),
        fc.nat(),
        fc.boolean(),
        (obj, pick, at, escaped) => {
          const members = Object.entries(obj).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`);
          const keys = Object.keys(obj);
          const key = keys[pick % keys.length] ?? '';
          members.splice(at % (members.length + 1), 0, `${escaped ? `"${escapeAll(key)}"` : JSON.stringify(key)}:null`);
          const text = `{"registry":[{${members.join(',')}}]}`;
          expect(errors(text)).toEqual([`registry[0]: duplicate key ${JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}…` : key)}`]);
        },
      ),
    );
  });
});

describe('member names that could reach a prototype, when asked to refuse them', () => {
  const refusing = (text: string) => scanJsonText(text, 32, 20, Number.POSITIVE_INFINITY, { refusePrototypeKeys: true });

  it.each([
    ['{"registry":{"__proto__":{"polluted":true}}}', ['registry.__proto__: member name not allowed'], 13],
    ['{"__proto__":1}', ['__proto__: member name not allowed'], 1],
    ['{"a":{"\\u005f_proto__":1}}', ['a.__proto__: member name not allowed'], 6],
    ['{"registry":{"constructor":{"prototype":{}}}}', ['registry.constructor.prototype: member name not allowed'], 28],
    [
      '[{"a":1,"__proto__":2},{"a":1,"__proto__":2}]',
      ['[0].__proto__: member name not allowed', '[1].__proto__: member name not allowed'],
      8,
    ],
  ])('names each in %s, and where the first is', (text, lines, position) => {
    const report = refusing(text);
    expect(report.errors).toEqual(lines);
    expect(report.forbiddenMember).toEqual({ name: lines[0]?.includes('prototype:') === true ? 'prototype' : '__proto__', position });
  });

  it.each([
    '{"constructor":1}',
    '{"constructor":[{"prototype":1}]}',
    '{"prototype":{}}',
    '{"proto":1,"__proto":2}',
    '["__proto__"]',
    '{"a":"__proto__"}',
  ])('lets %s through (the JSON parser keeps it as data)', (text) => {
    expect(refusing(text).errors).toEqual([]);
  });

  it('says nothing of them unless asked (an import file or a topic message holds them as data)', () => {
    expect(errors('{"registry":{"__proto__":{}}}')).toEqual([]);
    expect(scan('{"registry":{"__proto__":{}}}').forbiddenMember).toBeUndefined();
  });
});
