// Model-based: random sequences of group creates, moves and deletes, and user creates, group
// changes and deletes, against the real API, checked step by step against a plain model of what
// the contract promises: parents exist and never close a cycle (422), groups named by users,
// children or nothing else cannot go (409), users name existing groups (422); and at the end the
// read models (a group's users, a user's groups) agree with the model.

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIdentityApp, type TestApp } from '../../support/testApp.ts';

type Model = { run: string; groups: Map<string, { id: string; parent: string | undefined }>; users: Map<string, string[]> };
type Real = { t: TestApp; last: string };
type Cmd = fc.AsyncCommand<Model, Real>;

let t: TestApp;
beforeAll(async () => {
  t = await startIdentityApp();
});
afterAll(async () => {
  await t.close();
});

const GROUPS = ['A', 'B', 'C', 'D', 'E'];
const USERS = ['u1', 'u2', 'u3'];
const g = (m: Model, c: string) => `${m.run}${c}`;

/** Whether setting `child`'s parent to `parent` would close a cycle in the model. */
function closesCycle(m: Model, child: string, parent: string): boolean {
  for (let at: string | undefined = parent, steps = 0; at !== undefined && steps < 100; steps++) {
    if (at === child) return true;
    at = m.groups.get(at)?.parent;
  }
  return false;
}

const createGroup = (c: string, parent: string | undefined): Cmd => ({
  check: () => true,
  run: async (m, r) => {
    const code = g(m, c);
    const parentId = parent === undefined ? undefined : m.groups.get(g(m, parent))?.id;
    const res = await r.t.call({
      method: 'POST',
      url: '/api/v1/user-groups',
      payload: { code, name: c, type: 'TEAM', chars: {}, ...(parentId === undefined ? {} : { parentUserGroupId: parentId }) },
    });
    if (m.groups.has(code)) {
      expect(res.statusCode).toBe(409);
      return;
    }
    expect(res.statusCode, res.body).toBe(201);
    m.groups.set(code, { id: res.json<{ id: string }>().id, parent: parentId === undefined ? undefined : g(m, parent ?? '') });
    r.last = String(res.headers['x-event-position']);
  },
  toString: () => `createGroup(${c}, ${String(parent)})`,
});

const moveGroup = (c: string, parent: string): Cmd => ({
  check: (m) => m.groups.has(g(m, c)) && m.groups.has(g(m, parent)),
  run: async (m, r) => {
    const child = g(m, c);
    const to = g(m, parent);
    const res = await r.t.call({
      method: 'PATCH',
      url: `/api/v1/user-groups/${child}`,
      payload: { parentUserGroupId: m.groups.get(to)?.id },
    });
    if (closesCycle(m, child, to)) {
      expect(res.statusCode, res.body).toBe(422);
      return;
    }
    expect(res.statusCode, res.body).toBe(200);
    const rec = m.groups.get(child);
    if (rec) rec.parent = to;
    r.last = String(res.headers['x-event-position']);
  },
  toString: () => `moveGroup(${c} under ${parent})`,
});

const deleteGroup = (c: string): Cmd => ({
  check: () => true,
  run: async (m, r) => {
    const code = g(m, c);
    const res = await r.t.call({ method: 'DELETE', url: `/api/v1/user-groups/${code}` });
    if (!m.groups.has(code)) {
      expect(res.statusCode).toBe(404);
      return;
    }
    const named = [...m.groups.values()].some((x) => x.parent === code) || [...m.users.values()].some((gs) => gs.includes(code));
    if (named) {
      expect(res.statusCode, res.body).toBe(409);
      return;
    }
    expect(res.statusCode, res.body).toBe(204);
    m.groups.delete(code);
    r.last = String(res.headers['x-event-position']);
  },
  toString: () => `deleteGroup(${c})`,
});

const setUser = (u: string, groups: string[]): Cmd => ({
  check: () => true,
  run: async (m, r) => {
    const code = `${m.run}${u}`;
    const codes = [...new Set(groups)].map((c) => g(m, c));
    const exists = m.users.has(code);
    const res = exists
      ? await r.t.call({ method: 'PATCH', url: `/api/v1/users/${code}`, payload: { groups: codes } })
      : await r.t.call({
          method: 'POST',
          url: '/api/v1/users',
          payload: { code, type: 'INDIVIDUAL', givenName: u, chars: {}, groups: codes },
        });
    const before = m.users.get(code) ?? [];
    if (codes.some((c) => !m.groups.has(c) && !before.includes(c))) {
      expect(res.statusCode, res.body).toBe(422);
      return;
    }
    expect(res.statusCode, res.body).toBe(exists ? 200 : 201);
    m.users.set(code, codes);
    r.last = String(res.headers['x-event-position']);
  },
  toString: () => `setUser(${u}, [${groups.join(',')}])`,
});

const deleteUser = (u: string): Cmd => ({
  check: () => true,
  run: async (m, r) => {
    const code = `${m.run}${u}`;
    const res = await r.t.call({ method: 'DELETE', url: `/api/v1/users/${code}` });
    if (!m.users.has(code)) {
      expect(res.statusCode).toBe(404);
      return;
    }
    expect(res.statusCode).toBe(204);
    m.users.delete(code);
    r.last = String(res.headers['x-event-position']);
  },
  toString: () => `deleteUser(${u})`,
});

describe('groups and users against a reference model', () => {
  it('agree with the model on every step, and their read models at the end', async () => {
    const group = fc.constantFrom(...GROUPS);
    const creates = fc.tuple(group, fc.option(group, { nil: undefined })).map(([c, p]) => createGroup(c, p));
    const sets = fc.tuple(fc.constantFrom(...USERS), fc.array(group, { maxLength: 3 })).map(([u, gs]) => setUser(u, gs));
    const moves = fc.tuple(group, group).map(([c, p]) => moveGroup(c, p));
    // Creates and moves weigh more, so that sequences build trees deep enough to close cycles.
    const commands = fc.commands(
      [
        creates,
        creates,
        creates,
        moves,
        moves,
        moves,
        group.map((c) => deleteGroup(c)),
        sets,
        sets,
        fc.constantFrom(...USERS).map((u) => deleteUser(u)),
      ],
      { maxCommands: 40, size: 'max' },
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(commands, async (cmds) => {
        run++;
        const model: Model = { run: `M${String(Date.now())}R${String(run)}X`, groups: new Map(), users: new Map() };
        const real: Real = { t, last: '0' };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        for (const [code, { id }] of model.groups) {
          const members = await t.call({ method: 'GET', url: `/api/v1/user-groups/${id}/users?minPosition=${real.last}` });
          const expected = [...model.users]
            .filter(([, gs]) => gs.includes(code))
            .map(([u]) => u)
            .sort();
          expect(
            members
              .json<{ code: string }[]>()
              .map((u) => u.code)
              .sort(),
            code,
          ).toEqual(expected);
        }
        for (const [code, gs] of model.users) {
          const got = await t.call({ method: 'GET', url: `/api/v1/users/${code}` });
          expect(got.json<{ groups?: string[] }>().groups ?? [], code).toEqual(gs);
        }
      }),
      { numRuns: 30 },
    );
  }, 120_000);
});
