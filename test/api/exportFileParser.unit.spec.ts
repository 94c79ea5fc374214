// The incremental reader of an export object: the same members and items as JSON.parse of the
// whole text, however the text is cut into chunks; syntax errors at their position in the file.

import { describe, expect, it } from 'vitest';
import { ExportFileParser, type FilePiece } from '../../api/exportFileParser.ts';

function read(text: string, cut: (i: number) => number): FilePiece[] {
  const parser = new ExportFileParser();
  const pieces: FilePiece[] = [];
  for (let at = 0, n = 0; at < text.length; n++) {
    const size = Math.max(1, cut(n));
    pieces.push(...parser.feed(text.slice(at, at + size)));
    at += size;
  }
  parser.end();
  return pieces;
}

const text = JSON.stringify({
  name: 'an "export", with } and ] in strings \\ and \u00e9\u{1F600}',
  filtering: [{ column: 'code', operator: 'LIKE', value: 'A%' }],
  data: [{ id: 'a', nested: { list: [1, 2, { deep: '[{' }] }, n: -1.5e3, t: true, z: null }, { code: 'x\\"y' }, {}, { s: '\n\t' }],
  compareField: 'code',
  count: 12,
  flag: false,
});

describe('ExportFileParser', () => {
  const whole = JSON.parse(text) as Record<string, unknown>;
  for (const [name, cut] of [
    ['one chunk', () => text.length],
    ['a character at a time', () => 1],
    ['chunks of 7', () => 7],
    ['chunks of varying size', (n: number) => (n * 13) % 11],
  ] as const) {
    it(`reads the members and items as JSON.parse does (${name})`, () => {
      const pieces = read(text, cut);
      const members = Object.fromEntries(pieces.flatMap((p) => (p.kind === 'member' ? [[p.key, JSON.parse(p.text) as unknown]] : [])));
      const items = pieces.flatMap((p) => (p.kind === 'item' ? [JSON.parse(p.text) as unknown] : []));
      const { data, ...head } = whole;
      expect(members).toEqual(head);
      expect(items).toEqual(data);
      for (const p of pieces) expect(text.slice(p.at, p.at + p.text.length)).toBe(p.text);
    });
  }

  it('answers an empty data array and whitespace around everything', () => {
    const spaced = ' \n{ "data" : [ ] ,\n "filtering" : [ ] } \n';
    const pieces = read(spaced, () => 3);
    expect(pieces).toEqual([{ kind: 'member', key: 'filtering', text: '[ ]', at: spaced.indexOf('[ ] }') }]);
  });

  it('names the position of a structural error, and refuses what is not an object', () => {
    const fails = (t: string) => {
      try {
        read(t, () => 2);
      } catch (error) {
        return (error as Error).message;
      }
      return 'no error';
    };
    expect(fails('{"data": [,]}')).toBe('The file is not JSON: unexpected "," at position 10');
    expect(fails('{"data": [{}} ]}')).toBe('The file is not JSON: unexpected "}" at position 12');
    expect(fails('{"a": 1 "b": 2}')).toBe('The file is not JSON: unexpected "\\"" at position 8');
    expect(fails('{"data": []} x')).toBe('The file is not JSON: unexpected content after the export object at position 13');
    expect(fails('{"data": [{"a": 1}')).toBe('The file is not JSON: unexpected end of input');
    expect(fails('[1, 2]')).toBe('The file is not an export object');
    expect(fails('{"data": [], "data": []}')).toBe('The file would not be stored as sent');
  });
});
