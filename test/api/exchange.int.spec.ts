// Export, export as diff, import and apply diff (API.md "Diff entries") through the whole stack on
// the embedded stores, for a registry (worklog types) and for user groups.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { multipart } from '../support/multipart.ts';
import { uniqueCode } from '../support/samples.ts';
import { stageServiceJob, startTestApp, type TestApp, type TestResponse } from '../support/testApp.ts';

type Rec = { id: string; code: string; name: string; auditInfo: { version: number } } & Record<string, unknown>;
type Entry = { diffType: string; left?: Rec; right?: Rec; error?: { status: string; message: string } };
type ExportObject = {
  name: string;
  whenExported: string;
  exportedBy: string;
  entityType: string;
  compareField: string;
  filtering: unknown[];
  data: Rec[];
};

const IMPORT_LIMIT = 64 * 1024;
const IMPORT_FILE_LIMIT = 8 * 1024 * 1024;
const JOB_THRESHOLD = 5;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({
    extra: { exchange: { importMaxBytes: IMPORT_LIMIT, importFileMaxBytes: IMPORT_FILE_LIMIT, applyJobThreshold: JOB_THRESHOLD } },
  });
});
afterAll(async () => {
  await t.close();
});

async function importFile(
  base: string,
  content: string | Buffer,
  query: string,
  as: keyof TestApp['tokens'] = 'admin',
): Promise<TestResponse> {
  const { payload, headers } = multipart(content);
  return t.app.inject({
    method: 'POST',
    url: `${base}/import?${query}`,
    payload,
    headers: { ...headers, authorization: `Bearer ${t.tokens[as]}` },
  });
}

const byType = (entries: Entry[]) => entries.map((e) => `${e.diffType}:${(e.right ?? e.left)?.code ?? '?'}`).sort();

/** A settled read: waits for the read model to reflect the last write. */
async function exportOf(base: string, prefix: string, position: string, compareField?: string): Promise<ExportObject> {
  const res = await t.call({
    method: 'POST',
    url: `${base}/export?minPosition=${position}`,
    payload: {
      entityType: 'X',
      filtering: [{ column: 'code', operator: 'LIKE', value: `${prefix}%` }],
      ...(compareField === undefined ? {} : { compareField }),
    },
    as: 'viewer',
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<ExportObject>();
}

async function history(base: string, id: string): Promise<{ type: string; actor: string; correlationId?: string }[]> {
  const res = await t.call({ method: 'GET', url: `${base}/${id}/history` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

describe('worklog types (a registry)', () => {
  const base = '/api/v1/worklog-types';
  const prefix = uniqueCode('EX');
  const made: Rec[] = [];
  let lastPosition = '0';
  const create = async (code: string) => {
    const res = await t.call({ method: 'POST', url: base, payload: { code, name: `Name of ${code}` } });
    expect(res.statusCode, res.body).toBe(201);
    lastPosition = String(res.headers['x-event-position']);
    return res.json<Rec>();
  };
  let exported: ExportObject;

  beforeAll(async () => {
    for (const c of ['A', 'B', 'C']) made.push(await create(`${prefix}_${c}`));
    // Outside the export's filtering: never in its diff.
    await create(uniqueCode('OTHER'));
    exported = await exportOf(base, prefix, lastPosition);
  });

  it('exports the selected records with who, when and the request', () => {
    expect(exported).toMatchObject({
      exportedBy: 'vera-viewer',
      entityType: 'X',
      compareField: 'id',
      filtering: [{ column: 'code', operator: 'LIKE' }],
    });
    expect(Number.isNaN(Date.parse(exported.whenExported))).toBe(false);
    expect(exported.data.map((r) => r.code).sort()).toEqual(made.map((r) => r.code).sort());
  });

  it('diffs exactly the changes made since, and applying the diff twice writes one set of events', async () => {
    const [a, b, c] = made as [Rec, Rec, Rec];
    const changed = await t.call({ method: 'PUT', url: `${base}/${a.id}`, payload: { code: a.code, name: 'Renamed' } });
    expect(changed.statusCode, changed.body).toBe(200);
    expect((await t.call({ method: 'DELETE', url: `${base}/${b.id}` })).statusCode).toBe(204);
    const d = await create(`${prefix}_D`);
    const diffRes = await t.call({
      method: 'POST',
      url: `${base}/export/diff?compareField=id&minPosition=${lastPosition}`,
      payload: exported,
      as: 'viewer',
    });
    expect(diffRes.statusCode, diffRes.body).toBe(200);
    const diff = diffRes.json<Entry[]>();
    expect(byType(diff)).toEqual([`DIFF_TYPE_CHANGE:${a.code}`, `DIFF_TYPE_NEW:${b.code}`, `DIFF_TYPE_REMOVE:${d.code}`].sort());
    const change = diff.find((e) => e.diffType === 'DIFF_TYPE_CHANGE');
    expect(change?.left).toMatchObject({ id: a.id, name: 'Renamed' });
    expect(change?.right).toMatchObject({ id: a.id, name: a.name });

    const apply = () =>
      t.call({ method: 'POST', url: `${base}/diff/apply?compareField=id`, payload: diff, headers: { 'x-correlation-id': 'apply-1' } });
    const first = await apply();
    expect(first.statusCode, first.body).toBe(200);
    const items = first.json<Rec[]>();
    expect(items).toHaveLength(3);
    expect(items.every((i) => !('error' in i))).toBe(true);
    const after = {
      a: await history(base, a.id),
      b: await history(base, b.id),
      c: await history(base, c.id),
      d: await history(base, d.id),
    };
    expect(after.a.map((e) => e.type)).toEqual(['WorklogTypeCreated', 'WorklogTypeReplaced', 'WorklogTypeReplaced']);
    expect(after.b.map((e) => e.type)).toEqual(['WorklogTypeCreated', 'WorklogTypeDeleted', 'WorklogTypeCreated']);
    expect(after.d.map((e) => e.type)).toEqual(['WorklogTypeCreated', 'WorklogTypeDeleted']);
    expect(after.c).toHaveLength(1);
    for (const h of [after.a.at(-1), after.b.at(-1), after.d.at(-1)])
      expect(h).toMatchObject({ actor: 'alice-admin', correlationId: 'apply-1' });
    // The records are as exported again (B with its id).
    expect((await t.call({ method: 'GET', url: `${base}/${a.id}` })).json()).toMatchObject({ name: a.name });
    expect((await t.call({ method: 'GET', url: `${base}/${b.id}` })).json()).toMatchObject({ id: b.id, code: b.code });

    const second = await apply();
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json<unknown[]>()).toHaveLength(3);
    for (const [id, before] of [
      [a.id, after.a],
      [b.id, after.b],
      [d.id, after.d],
    ] as const)
      expect(await history(base, id)).toHaveLength(before.length);
    // And nothing is left to apply.
    const position = String((await t.call({ method: 'GET', url: `${base}/${a.id}` })).headers.etag);
    expect(position).toBe('"2"');
  });

  it('applies the other entries when one fails, answering the failure at its index', async () => {
    const good = { ...made[2], name: 'Changed by a diff' } as Rec;
    const entries = [
      { diffType: 'DIFF_TYPE_CHANGE', left: made[2], right: good },
      { diffType: 'DIFF_TYPE_NEW', right: { code: `${prefix}_BAD`, name: 42 } },
      { diffType: 'DIFF_TYPE_CHANGE', right: { id: randomUUID(), code: `${prefix}_GONE`, name: 'x' } },
      { diffType: 'DIFF_TYPE_NEW', right: { code: `${prefix}_E`, name: 'New one' } },
    ];
    const res = await t.call({ method: 'POST', url: `${base}/diff/apply`, payload: entries });
    expect(res.statusCode, res.body).toBe(200);
    const items = res.json<(Rec | { index: number; diffType: string; error: { status: string; errors: string[] } })[]>();
    expect(items[0]).toMatchObject({ id: made[2]?.id, name: 'Changed by a diff' });
    expect(items[1]).toMatchObject({
      index: 1,
      diffType: 'DIFF_TYPE_NEW',
      error: { status: 'BAD_REQUEST', errors: [expect.stringContaining('[1].right.name')] },
    });
    expect(items[2]).toMatchObject({ index: 2, error: { status: 'NOT_FOUND' } });
    expect(items[3]).toMatchObject({ code: `${prefix}_E`, name: 'New one', auditInfo: { version: 0 } });
  });

  it('applies entries naming the same record one after another, in order, and distinct ones at once', async () => {
    // Outside the prefix the other tests export.
    const other = uniqueCode('TW');
    const record = await create(`${other}_TWICE`);
    const { auditInfo: _a, ...fields } = record;
    const entries = [
      { diffType: 'DIFF_TYPE_CHANGE', left: record, right: { ...fields, name: 'First' } },
      ...Array.from({ length: 3 }, (_, i) => ({
        diffType: 'DIFF_TYPE_NEW',
        right: { code: `${other}_W${String(i)}`, name: `Window ${String(i)}` },
      })),
      { diffType: 'DIFF_TYPE_CHANGE', left: record, right: { ...fields, name: 'Second' } },
    ];
    const res = await t.call({ method: 'POST', url: `${base}/diff/apply?compareField=code`, payload: entries });
    expect(res.statusCode, res.body).toBe(200);
    const items = res.json<Rec[]>();
    expect(items.map((r) => r.name)).toEqual(['First', ...Array.from({ length: 3 }, (_, i) => `Window ${String(i)}`), 'Second']);
    expect((await t.call({ method: 'GET', url: `${base}/${record.id}` })).json()).toMatchObject({
      name: 'Second',
      auditInfo: { version: 2 },
    });
  });

  it('gives a NEW entry without an id the same record whoever applies it', async () => {
    const entries = [{ diffType: 'DIFF_TYPE_NEW', right: { code: uniqueCode('NOID'), name: 'No id given' } }];
    const first = await t.call({ method: 'POST', url: `${base}/diff/apply`, payload: entries });
    expect(first.statusCode, first.body).toBe(200);
    const [made] = first.json<Rec[]>();
    await t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });
    const byEditor = await t.call({ method: 'POST', url: `${base}/diff/apply`, payload: entries, as: 'editor' });
    expect(byEditor.statusCode, byEditor.body).toBe(200);
    expect(byEditor.json<Rec[]>()).toEqual([expect.objectContaining({ id: made?.id, auditInfo: expect.objectContaining({ version: 0 }) })]);
  });

  it('makes a record again when the same NEW is applied after its delete', async () => {
    const code = `${prefix}_AGAIN`;
    const add = [{ diffType: 'DIFF_TYPE_NEW', right: { code, name: 'Again' } }];
    const remove = [{ diffType: 'DIFF_TYPE_REMOVE', left: { code, name: 'Again' } }];
    const apply = async (entries: unknown[]) => {
      const res = await t.call({ method: 'POST', url: `${base}/diff/apply?compareField=code`, payload: entries });
      expect(res.statusCode, res.body).toBe(200);
      return res.json<Rec[]>()[0];
    };
    const first = await apply(add);
    await apply(remove);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${code}` })).statusCode).toBe(404);
    const again = await apply(add);
    expect(again?.id).toBe(first?.id);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${code}` })).json()).toMatchObject({ id: first?.id, name: 'Again' });
    await apply(add);
    expect((await history(base, first?.id ?? '')).map((e) => e.type)).toEqual([
      'WorklogTypeCreated',
      'WorklogTypeDeleted',
      'WorklogTypeCreated',
    ]);
  });

  it('answers 400 for a compare field that is not unique in the data, or no field at all', async () => {
    const items = [
      { code: `${prefix}_X1`, name: 'Same' },
      { code: `${prefix}_X2`, name: 'Same' },
    ];
    const res = await t.call({ method: 'POST', url: `${base}/export/diff?compareField=name`, payload: { data: items, filtering: [] } });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'DIFF.COMPARE_FIELD_NOT_UNIQUE', errors: [expect.stringContaining('data[1].name')] });
    const unknown = await t.call({ method: 'POST', url: `${base}/export/diff?compareField=nope`, payload: { data: [], filtering: [] } });
    expect(unknown.statusCode, unknown.body).toBe(400);
    const audit = await t.call({ method: 'POST', url: `${base}/diff/apply?compareField=auditInfo.version`, payload: [] });
    expect(audit.statusCode, audit.body).toBe(400);
  });

  it('matches by code across installations (ids differ) and by another unique field', async () => {
    const foreign = exported.data.map((r) => ({ ...r, id: randomUUID() }));
    const res = await t.call({ method: 'POST', url: `${base}/export/diff?compareField=code`, payload: { ...exported, data: foreign } });
    expect(res.statusCode, res.body).toBe(200);
    // Only C was changed since the export (by the failing-entry test); ids are not compared.
    // Records made by the tests before (E, AGAIN) are only here: REMOVE.
    expect(byType(res.json<Entry[]>())).toEqual([
      `DIFF_TYPE_CHANGE:${prefix}_C`,
      `DIFF_TYPE_REMOVE:${prefix}_AGAIN`,
      `DIFF_TYPE_REMOVE:${prefix}_E`,
    ]);
  });

  it('imports a file: its diff, and with save=true its application', async () => {
    const fresh = { code: `${prefix}_F`, name: 'From a file' };
    const file = JSON.stringify({ ...exported, data: [...exported.data, fresh] });
    const dry = await importFile(base, file, 'save=false&compareField=code');
    expect(dry.statusCode, dry.body).toBe(200);
    expect(byType(dry.json<Entry[]>())).toContain(`DIFF_TYPE_NEW:${prefix}_F`);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${prefix}_F` })).statusCode).toBe(404);
    const saved = await importFile(base, file, 'save=true&compareField=code');
    expect(saved.statusCode, saved.body).toBe(200);
    expect(saved.json<Entry[]>().every((e) => e.error === undefined)).toBe(true);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${prefix}_F` })).json()).toMatchObject({ name: 'From a file' });
  });

  it('imports a file with no data over nothing here as an empty diff', async () => {
    const none = await importFile(
      base,
      JSON.stringify({ ...exported, data: [], filtering: [{ column: 'code', operator: 'EQ', value: `${prefix}_NOTHING` }] }),
      'save=false',
    );
    expect(none.statusCode, none.body).toBe(200);
    expect(none.json<Entry[]>()).toEqual([]);
  });

  it('imports with save=true, marking an entry that could not be applied with its error', async () => {
    const taken = made[0]?.code ?? '';
    const file = JSON.stringify({
      data: [
        { id: randomUUID(), code: taken, name: 'Same code, other id' },
        { id: randomUUID(), code: `${prefix}_G`, name: 'Fine' },
      ],
      filtering: [{ column: 'code', operator: 'IN', values: [`${prefix}_NONE`] }],
    });
    const res = await importFile(base, file, 'save=true');
    expect(res.statusCode, res.body).toBe(200);
    const entries = res.json<Entry[]>();
    expect(entries).toHaveLength(2);
    expect(entries[0]).toMatchObject({ diffType: 'DIFF_TYPE_NEW', right: { code: taken }, error: { status: 'CONFLICT' } });
    expect(entries[1]?.error).toBeUndefined();
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${prefix}_G` })).statusCode).toBe(200);
  });

  it('refuses a file over the limit (413) and a malformed one (400 saying what is wrong)', async () => {
    const big = await importFile(base, JSON.stringify({ data: [], filtering: [], name: 'x'.repeat(IMPORT_FILE_LIMIT) }), 'save=false');
    expect(big.statusCode, big.body).toBe(413);
    expect(big.json()).toMatchObject({ status: 'PAYLOAD_TOO_LARGE', message: expect.any(String), traceId: expect.any(String) });
    const notJson = await importFile(base, '{"data": [,]}', 'save=false');
    expect(notJson.statusCode, notJson.body).toBe(400);
    expect(notJson.json<{ message: string }>().message).toMatch(/not JSON.*position 10/);
    const noData = await importFile(base, '{"filtering": []}', 'save=false');
    expect(noData.statusCode, noData.body).toBe(400);
    expect(noData.json<{ errors: string[] }>().errors.join()).toContain('data');
    const badEntry = await importFile(
      base,
      JSON.stringify({
        data: [
          { code: 'OK_1', name: 'fine' },
          { code: 'OK_2', name: 7 },
        ],
        filtering: [],
      }),
      'save=false',
    );
    expect(badEntry.statusCode, badEntry.body).toBe(400);
    expect(badEntry.json<{ errors: string[] }>().errors).toEqual([expect.stringContaining('data[1].name')]);
    const deep = await importFile(
      base,
      `{"data":[{"code":"D","name":"d","x":${'['.repeat(40)}${']'.repeat(40)}}],"filtering":[]}`,
      'save=false',
    );
    expect(deep.statusCode, deep.body).toBe(400);
    expect(deep.json<{ message: string; errors: string[] }>()).toMatchObject({
      message: expect.stringContaining('nests deeper'),
      errors: [expect.stringContaining('data[0]')],
    });
    const noFile = await t.call({ method: 'POST', url: `${base}/import`, payload: {} });
    expect(noFile.statusCode, noFile.body).toBe(400);
    // A form of more parts than an import reads is malformed, not too large (it may be tiny).
    const boundary = '----manyfields';
    const fields = Array.from(
      { length: 12 },
      (_, i) => `--${boundary}\r\nContent-Disposition: form-data; name="f${String(i)}"\r\n\r\n{}\r\n`,
    ).join('');
    const crowded = await t.call({
      method: 'POST',
      url: `${base}/import`,
      payload: `${fields}--${boundary}--\r\n`,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    expect(crowded.statusCode, crowded.body).toBe(400);
    expect(crowded.json<{ errors: string[] }>().errors).toEqual(['(form): at most 10 other fields (read and dropped)']);
    // Lines ending in LF alone are no multipart body: a 400, not a 500.
    const lf = multipart('{"data": [], "filtering": []}').payload.toString('utf8').replaceAll('\r\n', '\n');
    const broken = await t.app.inject({
      method: 'POST',
      url: `${base}/import`,
      payload: lf,
      headers: {
        'content-type': `multipart/form-data; boundary=${lf.slice(2, lf.indexOf('\n'))}`,
        authorization: `Bearer ${t.tokens.admin}`,
      },
    });
    expect(broken.statusCode, broken.body).toBe(400);
    expect(broken.json<{ message: string }>().message).toContain('Malformed multipart');
  });

  it('imports a file of 20,000 records as a diff, read as it arrives, listing exactly the changes', async () => {
    const big = uniqueCode('BIG');
    const here: Rec[] = [];
    for (let i = 0; i < 40; i++) here.push(await create(`${big}_${String(i).padStart(2, '0')}`));
    const original = await exportOf(base, big, lastPosition);
    // The data set here changes: five renamed, five deleted, five added.
    for (const r of here.slice(0, 5))
      expect((await t.call({ method: 'PUT', url: `${base}/${r.id}`, payload: { code: r.code, name: 'Renamed here' } })).statusCode).toBe(
        200,
      );
    for (const r of here.slice(5, 10)) expect((await t.call({ method: 'DELETE', url: `${base}/${r.id}` })).statusCode).toBe(204);
    const added: Rec[] = [];
    for (let i = 0; i < 5; i++) added.push(await create(`${big}_ADDED_${String(i)}`));
    await t.call({ method: 'GET', url: `${base}?minPosition=${lastPosition}` });
    // The file: the export (as it was) and 19,960 records only in it (ids of their own), matched by
    // code, a compare field the file names after its data.
    const generated = Array.from({ length: 19_960 }, (_, i) => ({
      id: randomUUID(),
      code: `${big}_N${String(i)}`,
      name: `Generated ${String(i)}`,
      description: 'x'.repeat(i % 50),
    }));
    const data = [...original.data, ...generated];
    const file = `{"name":"big","data":[\n${data.map((r) => JSON.stringify(r)).join(',\n')}\n],"filtering":${JSON.stringify(original.filtering)},"compareField":"code"}`;
    const res = await importFile(base, file, 'save=false');
    expect(res.statusCode, res.body.slice(0, 500)).toBe(200);
    const want = [
      ...here.slice(0, 5).map((r) => `DIFF_TYPE_CHANGE:${r.code}`),
      ...here.slice(5, 10).map((r) => `DIFF_TYPE_NEW:${r.code}`),
      ...added.map((r) => `DIFF_TYPE_REMOVE:${r.code}`),
      ...generated.map((r) => `DIFF_TYPE_NEW:${r.code}`),
    ].sort();
    const entries = res.json<Entry[]>();
    expect(byType(entries)).toEqual(want);
    const change = entries.find((e) => e.diffType === 'DIFF_TYPE_CHANGE');
    expect(change).toMatchObject({ left: { name: 'Renamed here' }, right: { name: expect.stringMatching(/^Name of /) } });
    // NEW in the order of the file, after CHANGE and REMOVE.
    expect(entries.at(-1)?.right?.code).toBe(`${big}_N19959`);

    // The same file with a syntax error deep inside: 400 naming its position in the file.
    const broken = file.replace(`"code":"${big}_N15000"`, `"code":@"${big}_N15000"`);
    const syntax = await importFile(base, broken, 'save=false');
    expect(syntax.statusCode, syntax.body).toBe(400);
    expect(syntax.json<{ message: string }>().message).toBe(
      `The file is not JSON: unexpected character at position ${String(broken.indexOf('@'))}`,
    );
    // An invalid record deep inside: 400 naming data[i].field.
    const invalid = file.replace(`"name":"Generated 17000"`, '"name":17000');
    const schema = await importFile(base, invalid, 'save=false');
    expect(schema.statusCode, schema.body).toBe(400);
    expect(schema.json<{ errors: string[] }>().errors).toEqual([
      expect.stringContaining(`data[${String(17_000 + original.data.length)}].name`),
    ]);
    // A repeated key inside a record, and a code that two records share.
    const repeated = file.replace(`"name":"Generated 18000"`, '"name":"Generated 18000","name":"again"');
    const twice = await importFile(base, repeated, 'save=false');
    expect(twice.statusCode, twice.body).toBe(400);
    expect(twice.json<{ errors: string[] }>().errors.join()).toContain(`data[${String(18_000 + original.data.length)}]`);
    const shared = file.replace(`"code":"${big}_N19000"`, `"code":"${big}_N3"`);
    const clash = await importFile(base, shared, 'save=false');
    expect(clash.statusCode, clash.body).toBe(400);
    expect(clash.json()).toMatchObject({
      code: 'DIFF.COMPARE_FIELD_NOT_UNIQUE',
      errors: [
        `data[${String(19_000 + original.data.length)}].code: ${big}_N3 is also the value of data[${String(3 + original.data.length)}]`,
      ],
    });
    // Cut short: the end of input.
    const cut = await importFile(base, file.slice(0, 1_000_000), 'save=false');
    expect(cut.statusCode, cut.body).toBe(400);
    expect(cut.json<{ message: string }>().message).toContain('unexpected end');
  });

  it("imports with save=true as a job when the diff is large, reading its entries back from the import's temporary file", async () => {
    const job = uniqueCode('IJ');
    const data = Array.from({ length: JOB_THRESHOLD + 2 }, (_, i) => ({
      id: randomUUID(),
      code: `${job}_${String(i)}`,
      name: `Job import ${String(i)}`,
    }));
    const file = JSON.stringify({ data, filtering: [{ column: 'code', operator: 'LIKE', value: `${job}%` }] });
    const res = await importFile(base, file, 'save=true');
    expect(res.statusCode, res.body).toBe(202);
    const { jobId } = res.json<{ jobId: string }>();
    for (;;) {
      const state = (await t.call({ method: 'GET', url: `/api/v1/jobs/${jobId}` })).json<{
        status: string;
        data: Record<string, unknown>;
      }>();
      if (state.status !== 'IN_PROGRESS') {
        expect(state).toMatchObject({
          status: 'COMPLETED',
          data: { entries: data.length, result: { done: data.length, applied: data.length, failed: 0 } },
        });
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const last = data.at(-1);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${last?.code ?? ''}` })).json()).toMatchObject({
      id: last?.id,
      name: last?.name,
    });
  });

  it('lets a viewer export and diff but not import or apply', async () => {
    expect((await t.call({ method: 'POST', url: `${base}/diff/apply`, payload: [], as: 'viewer' })).statusCode).toBe(403);
    expect((await importFile(base, JSON.stringify(exported), 'save=false', 'viewer')).statusCode).toBe(403);
    expect((await t.call({ method: 'POST', url: `${base}/export`, payload: { entityType: 'X' }, as: 'nobody' })).statusCode).toBe(403);
    expect((await t.call({ method: 'POST', url: `${base}/diff/apply`, payload: [], as: 'editor' })).statusCode).toBe(200);
  });

  it('runs a large apply as a job, idempotently', async () => {
    const entries = Array.from({ length: JOB_THRESHOLD + 2 }, (_, i) => ({
      diffType: 'DIFF_TYPE_NEW',
      right: { id: randomUUID(), code: `${prefix}_J${String(i)}`, name: `Job ${String(i)}` },
    }));
    entries.push({ diffType: 'DIFF_TYPE_NEW', right: { id: randomUUID(), code: `${prefix}_JBAD`, name: 5 as unknown as string } });
    const done = async (res: TestResponse) => {
      expect(res.statusCode, res.body).toBe(202);
      const { jobId } = res.json<{ jobId: string }>();
      expect(res.headers.location).toBe(`/api/v1/jobs/${jobId}`);
      for (;;) {
        const job = (await t.call({ method: 'GET', url: `/api/v1/jobs/${jobId}` })).json<{
          status: string;
          jobType: string;
          data: Record<string, unknown>;
        }>();
        if (job.status !== 'IN_PROGRESS') return job;
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const job = await done(await t.call({ method: 'POST', url: `${base}/diff/apply`, payload: entries }));
    expect(job).toMatchObject({
      status: 'COMPLETED',
      jobType: 'DIFF_APPLY',
      data: { resource: 'worklog-types', requestedBy: 'alice-admin' },
    });
    expect(job.data.result).toMatchObject({
      done: 8,
      applied: 7,
      unchanged: 0,
      failed: 1,
      failures: [{ index: 7, error: { status: 'BAD_REQUEST' } }],
    });
    const again = await done(await t.call({ method: 'POST', url: `${base}/diff/apply`, payload: entries }));
    expect(again.data.result).toMatchObject({ applied: 0, unchanged: 7, failed: 1 });
    const id = entries[0]?.right.id ?? '';
    expect(await history(base, id)).toHaveLength(1);
  });
});

describe('user groups', () => {
  const base = '/api/v1/user-groups';
  const prefix = uniqueCode('UG');
  let type = '';
  let lastPosition = '0';
  const create = async (code: string, extra: Record<string, unknown> = {}) => {
    const res = await t.call({ method: 'POST', url: base, payload: { code, name: `Group ${code}`, type, chars: {}, ...extra } });
    expect(res.statusCode, res.body).toBe(201);
    lastPosition = String(res.headers['x-event-position']);
    return res.json<Rec>();
  };

  beforeAll(async () => {
    type = uniqueCode('T');
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: type, name: 'Team', registry: {} } })).statusCode,
    ).toBe(201);
  });

  it('exports, diffs by a unique field of their own and applies the diff once', async () => {
    const one = await create(`${prefix}_1`, { email: `${prefix.toLowerCase()}-1@example.com` });
    const two = await create(`${prefix}_2`, { email: `${prefix.toLowerCase()}-2@example.com` });
    const exported = await exportOf(base, prefix, lastPosition, 'email');
    expect(exported.data.map((g) => g.code).sort()).toEqual([one.code, two.code]);
    const patched = await t.call({ method: 'PATCH', url: `${base}/${two.id}`, payload: { description: 'patched' } });
    expect(patched.statusCode, patched.body).toBe(200);
    const three = await create(`${prefix}_3`, { email: `${prefix.toLowerCase()}-3@example.com` });
    const diffRes = await t.call({ method: 'POST', url: `${base}/export/diff?minPosition=${lastPosition}`, payload: exported });
    expect(diffRes.statusCode, diffRes.body).toBe(200);
    const diff = diffRes.json<Entry[]>();
    expect(byType(diff)).toEqual([`DIFF_TYPE_CHANGE:${two.code}`, `DIFF_TYPE_REMOVE:${three.code}`]);
    for (let i = 0; i < 2; i++) {
      const res = await t.call({ method: 'POST', url: `${base}/diff/apply?compareField=email`, payload: diff });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json<Rec[]>().map((r) => r.code)).toEqual(diff.map((e) => (e.right ?? e.left)?.code));
    }
    expect((await history(base, two.id)).map((e) => e.type)).toEqual(['UserGroupCreated', 'UserGroupPatched', 'UserGroupReplaced']);
    expect((await history(base, three.id)).map((e) => e.type)).toEqual(['UserGroupCreated', 'UserGroupDeleted']);
    expect((await t.call({ method: 'GET', url: `${base}/${two.id}` })).json()).not.toHaveProperty('description');
  });

  it('refuses a compare field whose values repeat here', async () => {
    await create(`${prefix}_4`, { description: 'same' });
    await create(`${prefix}_5`, { description: 'same' });
    const res = await t.call({
      method: 'POST',
      url: `${base}/export/diff?compareField=description&minPosition=${lastPosition}`,
      payload: { data: [], filtering: [{ column: 'code', operator: 'LIKE', value: `${prefix}%` }] },
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ code: 'DIFF.COMPARE_FIELD_NOT_UNIQUE' });
    // The same through an import, which finds repeats here through its index: both only here, and
    // one matched by an incoming record.
    const filtering = [{ column: 'code', operator: 'LIKE', value: `${prefix}%` }];
    for (const data of [[], [{ code: `${prefix}_9`, name: 'x', type, chars: {}, description: 'same' }]]) {
      const imported = await importFile(base, JSON.stringify({ data, filtering }), 'save=false&compareField=description');
      expect(imported.statusCode, imported.body).toBe(400);
      expect(imported.json()).toMatchObject({
        code: 'DIFF.COMPARE_FIELD_NOT_UNIQUE',
        errors: expect.arrayContaining([expect.stringContaining('description same is held by another record too')]),
      });
    }
  });
});

it('writes one set of events when the same diff is applied twice at once', async () => {
  const base = '/api/v1/worklog-types';
  const created = await t.call({ method: 'POST', url: base, payload: { code: uniqueCode('ONCE'), name: 'Once' } });
  const current = created.json<Rec>();
  const target = current;
  const fresh = { id: randomUUID(), code: uniqueCode('TWICE'), name: 'Twice' };
  const diff = [
    { diffType: 'DIFF_TYPE_CHANGE', left: current, right: { ...current, name: 'Changed at once' } },
    { diffType: 'DIFF_TYPE_NEW', right: fresh },
  ];
  const before = (await history(base, target.id)).length;
  const answers = await Promise.all([1, 2, 3].map(() => t.call({ method: 'POST', url: `${base}/diff/apply`, payload: diff })));
  for (const res of answers) {
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<Rec[]>().map((r) => r.name)).toEqual(['Changed at once', 'Twice']);
  }
  expect(await history(base, target.id)).toHaveLength(before + 1);
  expect(await history(base, fresh.id)).toHaveLength(1);
});

it('fails a DIFF_APPLY job whose process ended (its lease is free), and leaves a running one alone', async () => {
  const { id, position } = await stageServiceJob(t, { jobType: 'DIFF_APPLY' });
  // A running job holds its lease: the schedule leaves it.
  const held = await t.service.readStore.tryLease(`job:${id}`, 'a-live-runner', 60_000);
  expect(held).toBe(true);
  await t.call({ method: 'GET', url: `/api/v1/jobs?minPosition=${position}` });
  await t.service.scheduler.tick();
  expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${id}` })).json()).toMatchObject({ status: 'IN_PROGRESS' });
  await t.service.readStore.releaseLease(`job:${id}`, 'a-live-runner');
  for (let i = 0; i < 200; i++) {
    await t.service.scheduler.tick();
    const job = (await t.call({ method: 'GET', url: `/api/v1/jobs/${id}` })).json<{ status: string; data: { failure?: string } }>();
    if (job.status !== 'IN_PROGRESS') {
      expect(job).toMatchObject({ status: 'FAILED', data: { failure: expect.stringContaining('apply the same diff again') } });
      return;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  expect.unreachable('the orphaned job was not failed');
});

describe('a save deleting many records', () => {
  it('takes allowMassRemove=true beyond MASS_REMOVE_PERCENT of the records and MASS_REMOVE_FLOOR, on import and on apply', async () => {
    const own = await startTestApp({ extra: { exchange: { massRemovePercent: 10, massRemoveFloor: 2 } } });
    try {
      const base = '/api/v1/worklog-types';
      const make = async (code: string) => {
        expect((await own.call({ method: 'POST', url: base, payload: { code, name: code } })).statusCode).toBe(201);
      };
      const save = (data: unknown[], query = '') => {
        const { payload, headers } = multipart(JSON.stringify({ entityType: 'worklog-types', compareField: 'code', filtering: [], data }));
        return own.app.inject({
          method: 'POST',
          url: `${base}/import?save=true&compareField=code${query}`,
          payload,
          headers: { ...headers, authorization: `Bearer ${own.tokens.admin}` },
        });
      };
      // Which records are there, read from the log (a read model may lag a moment behind).
      const there = async (...codes: string[]) => {
        const found: string[] = [];
        for (const code of codes) if ((await own.call({ method: 'GET', url: `${base}/${code}` })).statusCode === 200) found.push(code);
        return found;
      };
      const all = Array.from({ length: 30 }, (_, i) => `W_${String(i)}`);
      // A small data set is never held back: two records, both deleted (the floor).
      await make('TINY_A');
      await make('TINY_B');
      expect((await save([])).statusCode).toBe(200);
      expect(await there('TINY_A', 'TINY_B')).toEqual([]);
      for (const code of all) await make(code);
      const one = (await own.call({ method: 'GET', url: `${base}/W_0` })).json<Rec>();
      // One record imported by code: the other 29 would go.
      const refused = await save([one]);
      expect(refused.statusCode).toBe(400);
      expect(refused.json<{ code: string; message: string }>()).toMatchObject({
        code: 'DIFF.MASS_REMOVE',
        message: expect.stringContaining('delete 29 of the 30 worklog-types records, more than 3'),
      });
      expect(refused.json<{ message: string }>().message).toContain('allowMassRemove=true');
      expect(await there(...all)).toEqual(all);
      const dryRun = multipart(JSON.stringify({ entityType: 'worklog-types', compareField: 'code', filtering: [], data: [one] }));
      expect(
        (
          await own.app.inject({
            method: 'POST',
            url: `${base}/import?compareField=code`,
            payload: dryRun.payload,
            headers: { ...dryRun.headers, authorization: `Bearer ${own.tokens.admin}` },
          })
        ).statusCode,
      ).toBe(200);
      // Applying a diff: 3 of 30 is 10%, 4 is beyond.
      const removals = (n: number) => all.slice(1, 1 + n).map((code) => ({ diffType: 'DIFF_TYPE_REMOVE', left: { code, name: code } }));
      const beyond = await own.call({ method: 'POST', url: `${base}/diff/apply?compareField=code`, payload: removals(4) });
      expect([beyond.statusCode, beyond.json<{ code: string }>().code]).toEqual([400, 'DIFF.MASS_REMOVE']);
      expect(await there(...all)).toEqual(all);
      expect((await own.call({ method: 'POST', url: `${base}/diff/apply?compareField=code`, payload: removals(3) })).statusCode).toBe(200);
      expect(await there(...all.slice(0, 5))).toEqual(['W_0', 'W_4']);
      const allowed = await save([one], '&allowMassRemove=true');
      expect(allowed.statusCode, allowed.body).toBe(200);
      expect(await there(...all)).toEqual(['W_0']);
    } finally {
      await own.close();
    }
  });
});
