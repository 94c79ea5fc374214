// The CLI's pure parts: filter flags, the SSE parser over arbitrary chunk boundaries, job
// progress, tables and the diff summary.

import { describe, expect, it } from 'vitest';
import { serverSentEvents } from '../../cli/commands/audit.ts';
import { diffSummary, parseFilter } from '../../cli/commands/exchange.ts';
import { historyRows } from '../../cli/commands/history.ts';
import { progressOf } from '../../cli/jobs.ts';
import { cell, table } from '../../cli/output.ts';

describe('--filter column:OPERATOR:value', () => {
  it('reads each operator shape and keeps colons of the value', () => {
    expect(parseFilter('code:eq:A:B')).toEqual([{ column: 'code', operator: 'EQ', value: 'A:B' }]);
    expect(parseFilter('code:IN:A,B', [{ column: 'x', operator: 'IS_NULL' }])).toEqual([
      { column: 'x', operator: 'IS_NULL' },
      { column: 'code', operator: 'IN', values: ['A', 'B'] },
    ]);
    expect(parseFilter('parentId:IS_NOT_NULL')).toEqual([{ column: 'parentId', operator: 'IS_NOT_NULL' }]);
    expect(parseFilter('name:LIKE:')).toEqual([{ column: 'name', operator: 'LIKE', value: '' }]);
  });

  it('refuses an unknown operator or a missing column', () => {
    expect(() => parseFilter('code:ALMOST:x')).toThrow(/column:OPERATOR/);
    expect(() => parseFilter(':EQ:x')).toThrow(/column:OPERATOR/);
    expect(() => parseFilter('code')).toThrow(/column:OPERATOR/);
  });
});

describe('the text/event-stream parser', () => {
  const body =
    'id: 1\ndata: {"a":1}\n\n: a comment\n\nid: 2\r\nevent: e\r\ndata: line one\r\ndata: line two\r\n\r\nid: 3\ndata:no-space\n\n';
  const parse = async (chunks: string[]) => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (const c of chunks) controller.enqueue(new TextEncoder().encode(c));
        controller.close();
      },
    });
    const out = [];
    for await (const m of serverSentEvents(new Response(stream))) out.push(m);
    return out;
  };
  const expected = [
    { id: '1', data: '{"a":1}' },
    { id: '2', event: 'e', data: 'line one\nline two' },
    { id: '3', data: 'no-space' },
  ];

  it('gives id, event and multi-line data, skipping comments, whatever the chunks', async () => {
    expect(await parse([body])).toEqual(expected);
    // One character per chunk, so a CRLF is split between two chunks.
    expect(await parse(Array.from({ length: body.length }, (_, i) => body.charAt(i)))).toEqual(expected);
    // A multi-byte character split across chunks.
    const bytes = new TextEncoder().encode('id: 9\ndata: é\n\n');
    const stream = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(bytes.slice(0, 13));
        c.enqueue(bytes.slice(13));
        c.close();
      },
    });
    const out = [];
    for await (const m of serverSentEvents(new Response(stream))) out.push(m);
    expect(out).toEqual([{ id: '9', data: 'é' }]);
  });

  it('leaves out an unterminated last message (the connection dropped in it)', async () => {
    expect(await parse(['id: 1\ndata: x\n\nid: 2\ndata: half'])).toEqual([{ id: '1', data: 'x' }]);
  });
});

describe('job progress', () => {
  it("reads a rebuild's fold and catch-up and a diff apply's entries", () => {
    expect(progressOf({ phase: 'fold', folded: 50, of: 200 })).toEqual([50, 200, 'events', 'fold']);
    expect(progressOf({ phase: 'catch-up', position: '190', head: '210' })).toEqual([190, 210, 'position', 'catch-up']);
    expect(progressOf({ done: 30, applied: 29, failed: 1, of: 100 })).toEqual([30, 100, 'entries', 'apply']);
    expect(progressOf({ phase: 'refresh', matched: 3 })).toBeUndefined();
    expect(progressOf(undefined)).toBeUndefined();
  });
});

describe('tables', () => {
  it('pads every column but the last and cuts long cells', () => {
    expect(
      table(
        ['A', 'LONGER'],
        [
          ['xyz', '1'],
          ['', '22'],
        ],
      ),
    ).toBe('A    LONGER\nxyz  1\n     22');
    expect(cell('x'.repeat(100), 10)).toBe(`${'x'.repeat(9)}…`);
    expect(cell({ a: [1, 2] })).toBe('{"a":[1,2]}');
    expect(cell('two\nlines')).toBe('two lines');
  });

  it("history: one row per change, the version's columns on its first row", () => {
    expect(
      historyRows([
        {
          version: 0,
          type: 'XCreated',
          at: 'T0',
          actor: 'al',
          changes: [
            { op: 'add', path: '/code', value: 'C' },
            { op: 'add', path: '/name', value: 'N' },
          ],
        },
        { version: 1, type: 'XPatched', at: 'T1', actor: 'bo', changes: [{ op: 'remove', path: '/name' }] },
        { version: 2, type: 'XDeleted', at: 'T2', actor: 'bo', changes: [] },
      ]),
    ).toEqual([
      ['0', 'T0', 'al', 'XCreated', 'add', '/code', 'C'],
      ['', '', '', '', 'add', '/name', 'N'],
      ['1', 'T1', 'bo', 'XPatched', 'remove', '/name', ''],
      ['2', 'T2', 'bo', 'XDeleted', '', '', ''],
    ]);
  });
});

describe('the import diff summary', () => {
  it('counts each kind, names the changed fields (audit fields aside) and the entries not saved', () => {
    const text = diffSummary(
      [
        {
          diffType: 'DIFF_TYPE_CHANGE',
          left: { id: 'i1', code: 'A', name: 'a', tags: [1], auditInfo: { version: 1 } },
          right: { id: 'i1', code: 'A', name: 'b', tags: [1], auditInfo: { version: 9 } },
        },
        { diffType: 'DIFF_TYPE_NEW', right: { id: 'i2', code: 'B' }, error: { code: 'X.CONFLICT', message: 'taken' } },
        { diffType: 'DIFF_TYPE_REMOVE', left: { id: 'i3', code: 'C' } },
      ],
      { records: 2, save: true, show: 2, compareField: 'code' },
    );
    expect(text.split('\n')).toEqual([
      '2 record(s) in the file: 1 new, 1 changed, 1 only here (matched on code); saved but 1 entry failed (NOT SAVED below)',
      '',
      'DIFF    ID  CODE  FIELDS',
      'CHANGE  i1  A     name',
      'NEW     i2  B     NOT SAVED: X.CONFLICT taken',
      '… 1 more (--show or --json for all)',
    ]);
  });
});
