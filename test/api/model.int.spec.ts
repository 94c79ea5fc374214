// Model-based: random sequences of creates, code changes, renames, deletes and reads against the
// real API, checked step by step against a plain in-memory model of what the contract promises
// (unique codes, freed on delete, moved on change; reads reflect every acknowledged write).

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userType } from '../../modules/registries/domain/userType.ts';
import { sampleBody } from '../support/samples.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

type Model = { records: Map<string, { code: string; name: string }>; run: string };
type Real = { t: TestApp; ids: string[]; lastPosition: string };
type Cmd = fc.AsyncCommand<Model, Real>;

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const base = '/api/v1/user-types';
const CODES = ['A', 'B', 'C', 'D'];
const codeOf = (m: Model, c: string) => `${m.run}${c}`;
const holder = (m: Model, code: string) => [...m.records.entries()].find(([, r]) => r.code === code)?.[0];
const pickId = (m: Model, i: number) => [...m.records.keys()][i % Math.max(1, m.records.size)];

const create = (c: string, name: string): Cmd => ({
  check: () => true,
  run: async (m, r) => {
    const code = codeOf(m, c);
    const res = await r.t.call({ method: 'POST', url: base, payload: { ...sampleBody(userType, code), name } });
    if (holder(m, code) !== undefined) {
      expect(res.statusCode).toBe(409);
      return;
    }
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json<{ id: string }>().id;
    m.records.set(id, { code, name });
    r.lastPosition = String(res.headers['x-event-position']);
  },
  toString: () => `create(${c}, ${name})`,
});

const changeCode = (i: number, c: string): Cmd => ({
  check: (m) => m.records.size > 0,
  run: async (m, r) => {
    const id = pickId(m, i) ?? '';
    const code = codeOf(m, c);
    const res = await r.t.call({ method: 'PATCH', url: `${base}/${id}`, payload: { code } });
    const taken = holder(m, code);
    if (taken !== undefined && taken !== id) {
      expect(res.statusCode).toBe(409);
      return;
    }
    expect(res.statusCode, res.body).toBe(200);
    const rec = m.records.get(id);
    if (rec) rec.code = code;
    r.lastPosition = String(res.headers['x-event-position']);
  },
  toString: () => `changeCode(${String(i)}, ${c})`,
});

const rename = (i: number, name: string): Cmd => ({
  check: (m) => m.records.size > 0,
  run: async (m, r) => {
    const id = pickId(m, i) ?? '';
    const res = await r.t.call({
      method: 'PUT',
      url: `${base}/${id}`,
      payload: { ...sampleBody(userType, m.records.get(id)?.code ?? ''), name },
    });
    expect(res.statusCode, res.body).toBe(200);
    const rec = m.records.get(id);
    if (rec) rec.name = name;
    r.lastPosition = String(res.headers['x-event-position']);
  },
  toString: () => `rename(${String(i)}, ${name})`,
});

const remove = (i: number): Cmd => ({
  check: (m) => m.records.size > 0,
  run: async (m, r) => {
    const id = pickId(m, i) ?? '';
    const res = await r.t.call({ method: 'DELETE', url: `${base}/${id}` });
    expect(res.statusCode).toBe(204);
    m.records.delete(id);
    r.lastPosition = String(res.headers['x-event-position']);
  },
  toString: () => `remove(${String(i)})`,
});

const readByCode = (c: string): Cmd => ({
  check: () => true,
  run: async (m, r) => {
    const code = codeOf(m, c);
    const res = await r.t.call({ method: 'GET', url: `${base}/${code}` });
    const id = holder(m, code);
    if (id === undefined) expect(res.statusCode).toBe(404);
    else expect(res.json()).toMatchObject({ id, code, name: m.records.get(id)?.name });
  },
  toString: () => `readByCode(${c})`,
});

describe('registry against a reference model', () => {
  it('agrees with the model on every step and in the read model at the end', async () => {
    const code = fc.constantFrom(...CODES);
    const name = fc.constantFrom('Alpha', 'Beta', 'Gamma');
    const commands = fc.commands(
      [
        fc.tuple(code, name).map(([c, n]) => create(c, n)),
        fc.tuple(fc.nat(), code).map(([i, c]) => changeCode(i, c)),
        fc.tuple(fc.nat(), name).map(([i, n]) => rename(i, n)),
        fc.nat().map((i) => remove(i)),
        code.map((c) => readByCode(c)),
      ],
      { maxCommands: 40 },
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        run++;
        // R1X is no prefix of R10X: every run's codes are told apart by a plain prefix.
        const model: Model = { records: new Map(), run: `M${String(Date.now())}R${String(run)}X` };
        const real: Real = { t, ids: [], lastPosition: '0' };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        const listed = await t.call({
          method: 'POST',
          url: `${base}/search?minPosition=${real.lastPosition}`,
          payload: { filter: [{ column: 'code', operator: 'LIKE', value: `${model.run}%` }] },
        });
        const expected = [...model.records.entries()]
          .map(([id, r]) => ({ id, code: r.code, name: r.name }))
          .sort((a, b) => (a.code < b.code ? -1 : 1));
        expect(
          listed.json<{ id: string; code: string; name: string }[]>().map(({ id, code: c, name: n }) => ({ id, code: c, name: n })),
        ).toEqual(expected);
      }),
      { numRuns: 25 },
    );
  });
});
