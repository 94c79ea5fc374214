// admin tail and admin replay against the real audit feed, over a real socket.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock, startTestApp, type TestApp } from '../support/testApp.ts';
import { uniqueCode } from '../support/samples.ts';
import { replayTimeline, runCli, startCli } from './support.ts';

type Exported = {
  name: string;
  whenExported: string;
  exportedBy: string;
  entityType: string;
  filtering: unknown[];
  data: { id: string }[];
};

let t: TestApp;
let env: Record<string, string>;
const clock = manualClock();

beforeAll(async () => {
  t = await startTestApp({ clock });
  env = { ADMIN_URL: await t.listen(), ADMIN_TOKEN: t.tokens.admin };
});
afterAll(async () => {
  await t.close();
});

describe('admin replay', () => {
  it('equals GET /logs/{id}?asOf=T for logs, a "delete old logs" made before T removing them and one made after T not', async () => {
    const HOUR = 3_600_000;
    const code = uniqueCode('REPLAY_LT');
    expect((await t.call({ method: 'POST', url: '/api/v1/log-types', payload: { code, name: 'replayed' } })).statusCode).toBe(201);
    const at = (h: number) => new Date(clock.now().getTime() - h * HOUR).toISOString();
    const aLog = (ownerId: string) => ({
      ownerType: 'TICKET',
      ownerId,
      logTypeCode: code,
      startDate: at(48),
      endDate: at(47),
      request: 'r',
      response: 's',
      correlationId: uniqueCode('c'),
    });
    const ids: string[] = [];
    for (const owner of ['R-1', 'R-1', 'R-2', 'R-3']) {
      const res = await t.call({ method: 'POST', url: '/api/v1/logs', payload: aLog(owner) });
      expect(res.statusCode, res.body).toBe(201);
      ids.push(res.json<{ id: string }>().id);
    }
    clock.advance(60_000);
    expect(
      (
        await t.call({
          method: 'DELETE',
          url: `/api/v1/logs?code=${code}&olderThan=${encodeURIComponent(at(1))}&ownerType=TICKET&ownerId=R-1`,
        })
      ).json(),
    ).toEqual({ deleted: 2 });
    clock.advance(60_000);
    const between = clock.now().toISOString();
    clock.advance(60_000);
    expect(
      (
        await t.call({
          method: 'DELETE',
          url: `/api/v1/logs?code=${code}&olderThan=${encodeURIComponent(at(1))}&ownerType=TICKET&ownerId=R-2`,
        })
      ).json(),
    ).toEqual({ deleted: 1 });
    clock.advance(60_000);
    const run = await runCli(['replay', '--until', between, '--resource', 'logs'], env);
    expect(run.stderr).toBe('');
    const replayed = new Map((JSON.parse(run.stdout) as Exported).data.map((r) => [r.id, r]));
    const shownAt = await Promise.all(
      ids.map(async (id) => {
        const res = await t.call({ method: 'GET', url: `/api/v1/logs/${id}?asOf=${encodeURIComponent(between)}` });
        return res.statusCode === 200 ? res.json<{ id: string }>() : undefined;
      }),
    );
    // R-1's two deleted by then; R-2's deleted only after; R-3's never.
    expect(shownAt.map((r) => r !== undefined)).toEqual([false, false, true, true]);
    for (const [i, id] of ids.entries()) expect(replayed.get(id), id).toEqual(shownAt[i]);
    // Now, the later deletion counts too.
    expect(
      (await t.call({ method: 'GET', url: `/api/v1/logs/${ids[2] ?? ''}?asOf=${encodeURIComponent(clock.now().toISOString())}` }))
        .statusCode,
    ).toBe(404);
  });

  it('equals GET ?asOf=T one by one, for records created, replaced, patched and deleted before and after T', async () => {
    const { until, touched } = await replayTimeline(t, clock);
    const run = await runCli(['replay', '--until', until], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const exports = JSON.parse(run.stdout) as Exported[];
    const replayed = new Map(exports.flatMap((e) => e.data.map((r) => [`${e.entityType}/${r.id}`, r])));
    let live = 0;
    for (const { path, id } of touched) {
      const res = await t.call({ method: 'GET', url: `/api/v1/${path}/${id}?asOf=${encodeURIComponent(until)}` });
      if (res.statusCode === 404) expect(replayed.get(`${path}/${id}`), `${path}/${id}`).toBeUndefined();
      else {
        expect(replayed.get(`${path}/${id}`), `${path}/${id}`).toEqual(res.json());
        live++;
      }
    }
    expect(live).toBeGreaterThanOrEqual(12);

    const one = await runCli(['replay', '--until', until, '--resource', 'user-group-types'], env);
    expect(one.code).toBe(0);
    const exported = JSON.parse(one.stdout) as Exported;
    expect(exported).toMatchObject({ entityType: 'user-group-types', exportedBy: 'alice-admin', filtering: [] });
    expect(exported.data).toEqual(exports.find((e) => e.entityType === 'user-group-types')?.data);

    // The replay is an export object the import takes: its diff is what changed since T (one
    // patched, one deleted after T, one created after T).
    const file = join(mkdtempSync(join(tmpdir(), 'admin-cli-replay-')), 'at-T.json');
    writeFileSync(file, one.stdout);
    const since = await runCli(['import', 'user-group-types', file], env);
    expect(since.stderr).toBe('');
    expect(since.stdout).toContain(
      `${String(exported.data.length)} record(s) in the file: 1 new, 1 changed, 1 only here (matched on id); nothing saved`,
    );
    expect(since.stdout).toMatch(/CHANGE\s+\S+\s+PATCHED_\S+\s+description, name/);
    expect(since.stdout).toMatch(/NEW\s+\S+\s+LATER_GONE_/);
    expect(since.stdout).toMatch(/REMOVE\s+\S+\s+NEW_AFTER_/);
  });

  it('a malformed --until is a usage error; a replay of an unknown resource too', async () => {
    const bad = await runCli(['replay', '--until', 'yesterday'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^admin: [^\n]*ISO 8601[^\n]*\n$/);
    const unknown = await runCli(['replay', '--until', '2026-01-01T00:00:00Z', '--resource', 'no-such-things'], env);
    expect(unknown.code).toBe(2);
  });
});

describe('admin tail', () => {
  it('prints events as they are written, filtered by type, and stops on Ctrl-C with exit 0', async () => {
    const tail = startCli(['tail', '--json', '--types', 'UserGroupTypeCreated,UserGroupTypeDeleted'], env);
    // Writes until the stream is open and the first of them arrives (the tail starts at "now").
    const code = uniqueCode('TAIL');
    let lines: string[] = [];
    for (let i = 0; lines.length === 0 && tail.out.stderr === ''; i++) {
      expect(
        (
          await t.call({
            method: 'POST',
            url: '/api/v1/user-group-types',
            payload: { code: `${code}_${String(i)}`, name: 'x', registry: {} },
          })
        ).statusCode,
      ).toBe(201);
      lines = await Promise.race([
        tail.lines(1),
        new Promise<string[]>((resolve) =>
          setTimeout(() => {
            resolve([]);
          }, 300),
        ),
      ]);
    }
    expect(tail.out.stderr).toBe('');
    const patched = await t.call({ method: 'PATCH', url: `/api/v1/user-group-types/${code}_0`, payload: { name: 'patched' } });
    expect(patched.statusCode).toBe(200);
    expect((await t.call({ method: 'DELETE', url: `/api/v1/user-group-types/${code}_0` })).statusCode).toBe(204);
    const seen = await tail.lines(lines.length + 1);
    const events = seen.map((l) => JSON.parse(l) as { type: string; stream: string; position: unknown });
    expect(events.every((e) => e.type === 'UserGroupTypeCreated' || e.type === 'UserGroupTypeDeleted')).toBe(true);
    expect(events.at(-1)?.type).toBe('UserGroupTypeDeleted');
    expect(await tail.stop()).toBe(0);
  });

  it('a wrong token ends it at once with the 401 on one line', async () => {
    const run = await runCli(['tail'], { ...env, ADMIN_TOKEN: 'wrong' });
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/^admin: 401 [^\n]+\n$/);
  });
});

describe('admin tail across a restart of the service', () => {
  it('resumes after the last event it printed once the service is back, saying so on stderr', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'admin-cli-tail-restart-'));
    const first = await startTestApp({ dataDir });
    const url = await first.listen();
    const port = Number(new URL(url).port);
    const tail = startCli(['tail', '--json', '--types', 'UserGroupTypeCreated'], { ADMIN_URL: url, ADMIN_TOKEN: first.tokens.admin });
    const code = uniqueCode('RESTART');
    let lines: string[] = [];
    for (let i = 0; lines.length === 0; i++) {
      expect(
        (
          await first.call({
            method: 'POST',
            url: '/api/v1/user-group-types',
            payload: { code: `${code}_${String(i)}`, name: 'before', registry: {} },
          })
        ).statusCode,
      ).toBe(201);
      lines = await Promise.race([
        tail.lines(1),
        new Promise<string[]>((resolve) =>
          setTimeout(() => {
            resolve([]);
          }, 300),
        ),
      ]);
    }
    await first.close({ keepData: true });
    await tail.stderrMatching(/resuming after position \d+/);

    const second = await startTestApp({ dataDir });
    try {
      await second.app.listen({ port, host: '127.0.0.1' });
      expect(
        (
          await second.call({
            method: 'POST',
            url: '/api/v1/user-group-types',
            payload: { code: `${code}_AFTER`, name: 'after', registry: {} },
          })
        ).statusCode,
      ).toBe(201);
      const seen = (await tail.lines(lines.length + 1)).map((l) => JSON.parse(l) as { type: string; data: { code: string } });
      // Nothing twice, nothing lost: every event before the restart once, then the new one.
      expect(seen.at(-1)?.data.code).toBe(`${code}_AFTER`);
      expect(new Set(seen.map((e) => e.data.code)).size).toBe(seen.length);
      expect(await tail.stop()).toBe(0);
    } finally {
      await second.close();
    }
  });
});
