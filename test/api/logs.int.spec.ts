// Operation logs over HTTP on the embedded stores: every route of API.md's Logs table, the log type
// rules, "delete old logs" (exactly the matching logs, one deletion record, 403 for editors and
// viewers), a rebuild of the logs' read model after the deletion and after the retention pass, and
// the retention pass itself: the deleted logs' events leave the log file, which shrinks, and no
// position is handed out again.

import { randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_LOG_FILE } from '../../infra/embedded.ts';
import { manualClock, readModelDocuments, startTestApp, type TestApp } from '../support/testApp.ts';

const clock = manualClock(new Date());
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp({ clock, extra: { settings: { logs: { retentionDays: 1 } }, manualScheduler: true } });
});
afterAll(async () => {
  await t.close();
});

type Log = {
  id: string;
  logTypeCode: string;
  logType?: { code?: string; name?: string };
  duration?: number;
  startDate: string;
  ownerId?: string;
  auditInfo: { version: number };
};

const HOUR = 3_600_000;
const at = (hoursAgo: number) => new Date(Date.now() - hoursAgo * HOUR).toISOString();
const aLog = (extra: Record<string, unknown> = {}) => {
  const startDate = typeof extra.startDate === 'string' ? extra.startDate : at(48);
  return {
    ownerType: 'TICKET',
    ownerId: 'T-1',
    logTypeCode: 'HTTP_OUT',
    startDate,
    endDate: new Date(Date.parse(startDate) + 1500).toISOString(),
    request: 'GET /orders',
    response: '200 OK',
    correlationId: randomUUID(),
    ...extra,
  };
};

async function logType(code: string): Promise<string> {
  const res = await t.call({ method: 'POST', url: '/api/v1/log-types', payload: { code, name: `${code} calls` } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string }>().id;
}

async function create(body: Record<string, unknown>): Promise<{ log: Log; at: string }> {
  const res = await t.call({ method: 'POST', url: '/api/v1/logs', payload: body });
  expect(res.statusCode, res.body).toBe(201);
  return { log: res.json<Log>(), at: String(res.headers['x-event-position']) };
}

async function recreate(model: string): Promise<void> {
  const ack = await t.call({ method: 'POST', url: `/api/v1/indexes/${model}/recreate` });
  expect(ack.statusCode, ack.body).toBe(202);
  await t.service.readModelJobs.idle();
  const job = await t.call({ method: 'GET', url: `/api/v1/jobs/${ack.json<{ jobId: string }>().jobId}` });
  expect(job.json()).toMatchObject({ status: 'COMPLETED' });
}

const fileBytes = () =>
  [EVENT_LOG_FILE, `${EVENT_LOG_FILE}-wal`].reduce(
    (sum, f) => sum + (statSync(join(t.dataDir, f), { throwIfNoEntry: false })?.size ?? 0),
    0,
  );

describe('logs', () => {
  it('creates, reads and replaces a log; derives its duration and log type; answers by owner and search', async () => {
    const typeId = await logType('SOAP_IN');
    const { log } = await create(aLog({ ownerId: 'T-crud' }));
    expect(log).toMatchObject({
      logTypeCode: 'HTTP_OUT',
      duration: 1500,
      logType: { code: 'HTTP_OUT', name: 'HTTP_OUT calls' },
      auditInfo: { version: 0 },
    });
    const byCode = await create(aLog({ logTypeCode: undefined, logType: { code: 'SOAP_IN' }, ownerId: 'T-crud', duration: 7 }));
    expect(byCode.log).toMatchObject({ logTypeCode: 'SOAP_IN', duration: 7, logType: { id: typeId, code: 'SOAP_IN' } });
    const byId = await create(aLog({ logTypeCode: undefined, logType: { id: typeId }, ownerId: 'T-crud' }));
    expect(byId.log.logTypeCode).toBe('SOAP_IN');

    const got = await t.call({ method: 'GET', url: `/api/v1/logs/${log.id}`, as: 'viewer' });
    expect(got.statusCode).toBe(200);
    expect(got.headers.etag).toBe('"0"');
    const replaced = await t.call({
      method: 'PUT',
      url: `/api/v1/logs/${log.id}`,
      payload: { ...aLog({ ownerId: 'T-crud' }), response: '500 error', resultCode: '500' },
      headers: { 'if-match': '"0"' },
    });
    expect(replaced.statusCode, replaced.body).toBe(200);
    expect(replaced.json()).toMatchObject({
      response: '500 error',
      resultCode: '500',
      logType: { code: 'HTTP_OUT' },
      auditInfo: { version: 1 },
    });
    const position = String(replaced.headers['x-event-position']);
    const stale = await t.call({ method: 'PUT', url: `/api/v1/logs/${log.id}`, payload: aLog(), headers: { 'if-match': '"0"' } });
    expect(stale.statusCode).toBe(412);

    const owned = await t.call({
      method: 'GET',
      url: `/api/v1/logs/by-owner?ownerType=TICKET&ownerId=T-crud&minPosition=${position}`,
      as: 'viewer',
    });
    expect(
      owned
        .json<Log[]>()
        .map((l) => l.id)
        .sort(),
    ).toEqual([log.id, byCode.log.id, byId.log.id].sort());
    const search = await t.call({
      method: 'POST',
      url: `/api/v1/logs/search?minPosition=${position}`,
      payload: {
        filter: [
          { column: 'ownerId', value: 'T-crud' },
          { column: 'resultCode', value: '500' },
        ],
      },
      as: 'viewer',
    });
    expect(search.json<Log[]>().map((l) => l.id)).toEqual([log.id]);
    const byCorrelation = await t.call({
      method: 'POST',
      url: `/api/v1/logs/search/page?minPosition=${position}`,
      payload: { filter: [{ column: 'correlationId', value: byId.log.id }] },
    });
    expect(byCorrelation.json()).toMatchObject({ totalElements: 0 });
    expect((await t.call({ method: 'GET', url: `/api/v1/logs/${log.id}/history` })).json<unknown[]>()).toHaveLength(2);
  });

  it('refuses what is wrong with the documented statuses', async () => {
    const bad = async (body: unknown, status: number, line?: string) => {
      const res = await t.call({ method: 'POST', url: '/api/v1/logs', payload: body });
      expect(res.statusCode, res.body).toBe(status);
      if (line !== undefined) expect(res.json<{ errors: string[] }>().errors.join('\n')).toContain(line);
    };
    await bad(aLog({ logTypeCode: undefined }), 400, 'logTypeCode');
    await bad(aLog({ logTypeCode: 'NO_SUCH_TYPE' }), 422, 'logTypeCode');
    await bad(aLog({ logTypeCode: undefined, logType: { id: randomUUID() } }), 422, 'logType.id');
    await bad(aLog({ logType: { code: 'SOAP_IN' } }), 400, 'logType.code');
    await bad(aLog({ endDate: at(49) }), 400, 'endDate');
    await bad(aLog({ request: undefined }), 400, 'request');
    await bad(aLog({ correlationId: undefined }), 400, 'correlationId');
    await bad(aLog({ unknown: 1 }), 400);
    const id = randomUUID();
    await create(aLog({ id }));
    await bad(aLog({ id }), 409);
    expect((await t.call({ method: 'GET', url: '/api/v1/logs/not-a-uuid' })).statusCode).toBe(400);
    expect((await t.call({ method: 'GET', url: `/api/v1/logs/${randomUUID()}` })).statusCode).toBe(404);
    expect((await t.call({ method: 'PUT', url: `/api/v1/logs/${randomUUID()}`, payload: aLog() })).statusCode).toBe(404);
    expect((await t.call({ method: 'POST', url: '/api/v1/logs', payload: aLog(), as: 'viewer' })).statusCode).toBe(403);
    expect((await t.call({ method: 'GET', url: '/api/v1/logs/by-owner?ownerType=TICKET' })).statusCode).toBe(400);
  });
});

beforeAll(async () => {
  await logType('HTTP_OUT');
});

describe('delete old logs racing replaces', () => {
  it('deletes exactly the logs it counts: each log is either deleted (404) or replaced (200), never both, never neither', async () => {
    const owner = `R-${randomUUID()}`;
    const ids: string[] = [];
    for (let i = 0; i < 120; i++) ids.push((await create(aLog({ ownerId: owner, startDate: at(30) }))).log.id);
    const olderThan = encodeURIComponent(at(24));
    // Each replace moves its log out of the filter (startDate now recent); all race the deletion.
    const replaces = ids.map((id) =>
      t.call({ method: 'PUT', url: `/api/v1/logs/${id}`, payload: aLog({ ownerId: owner, startDate: at(1) }) }),
    );
    const deletion = t.call({
      method: 'DELETE',
      url: `/api/v1/logs?code=HTTP_OUT&olderThan=${olderThan}&ownerType=TICKET&ownerId=${owner}`,
    });
    const [answers, res] = await Promise.all([Promise.all(replaces), deletion]);
    expect(res.statusCode, res.body).toBe(200);
    const { deleted } = res.json<{ deleted: number }>();
    const replaced = answers.filter((a) => a.statusCode === 200).length;
    expect(answers.every((a) => a.statusCode === 200 || a.statusCode === 404)).toBe(true);
    expect(replaced + deleted).toBe(ids.length);
    const gets = await Promise.all(ids.map((id) => t.call({ method: 'GET', url: `/api/v1/logs/${id}` })));
    expect(gets.filter((g) => g.statusCode === 404)).toHaveLength(deleted);
    const left = await t.call({
      method: 'GET',
      url: `/api/v1/logs/by-owner?ownerType=TICKET&ownerId=${owner}&minPosition=${String(res.headers['x-event-position'])}`,
    });
    expect(left.json<Log[]>()).toHaveLength(replaced);
  });
});

describe('delete old logs', () => {
  const owner = `T-${randomUUID()}`;
  const made: { id: string; deleted: boolean }[] = [];
  let deletionAt = '';

  beforeAll(async () => {
    await logType('FTP');
    const payload = 'x'.repeat(3000);
    // 300 of them, of which exactly 200 match: the right type, owner, and older than 24 h.
    for (let i = 0; i < 300; i++) {
      const variant = i % 3;
      const body =
        variant === 0
          ? aLog({ ownerId: owner, startDate: at(30 + (i % 5)), request: payload })
          : variant === 1
            ? aLog({
                ownerId: owner,
                startDate: at(25),
                logTypeCode: i % 2 === 0 ? 'FTP' : 'HTTP_OUT',
                ...(i % 2 === 0 ? {} : { startDate: at(2) }),
                request: payload,
              })
            : aLog({ ownerId: owner, startDate: at(40), request: payload });
      const { log } = await create(body);
      made.push({ id: log.id, deleted: variant !== 1 });
    }
  }, 120_000);

  it('is for admins only and needs all four parameters', async () => {
    const url = `/api/v1/logs?code=HTTP_OUT&olderThan=${encodeURIComponent(at(24))}&ownerType=TICKET&ownerId=${owner}`;
    expect((await t.call({ method: 'DELETE', url, as: 'editor' })).statusCode).toBe(403);
    expect((await t.call({ method: 'DELETE', url, as: 'viewer' })).statusCode).toBe(403);
    expect((await t.call({ method: 'DELETE', url: `/api/v1/logs?code=HTTP_OUT&ownerType=TICKET&ownerId=${owner}` })).statusCode).toBe(400);
    expect(
      (await t.call({ method: 'DELETE', url: `/api/v1/logs?code=HTTP_OUT&olderThan=yesterday&ownerType=TICKET&ownerId=${owner}` }))
        .statusCode,
    ).toBe(400);
    expect((await t.call({ method: 'GET', url: `/api/v1/logs/${made[0]?.id ?? ''}` })).statusCode).toBe(200);
  });

  it('removes exactly the matching logs with one event, and says who did it and when', async () => {
    const headBefore = await t.service.readStore.checkpoint('logs');
    const url = `/api/v1/logs?code=HTTP_OUT&olderThan=${encodeURIComponent(at(24))}&ownerType=TICKET&ownerId=${owner}`;
    const res = await t.call({ method: 'DELETE', url, headers: { 'idempotency-key': `del-${owner}` } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ deleted: 200 });
    deletionAt = String(res.headers['x-event-position']);
    // One event in the log for 200 logs.
    expect(BigInt(deletionAt) - headBefore).toBeLessThanOrEqual(1n);
    const retry = await t.call({ method: 'DELETE', url, headers: { 'idempotency-key': `del-${owner}` } });
    expect(retry.json()).toEqual({ deleted: 200 });
    expect(
      (
        await t.call({
          method: 'DELETE',
          url: `/api/v1/logs?code=FTP&olderThan=${encodeURIComponent(at(24))}&ownerType=TICKET&ownerId=${owner}`,
          headers: { 'idempotency-key': `del-${owner}` },
        })
      ).statusCode,
    ).toBe(409);

    const left = await t.call({ method: 'GET', url: `/api/v1/logs/by-owner?ownerType=TICKET&ownerId=${owner}&minPosition=${deletionAt}` });
    expect(
      left
        .json<Log[]>()
        .map((l) => l.id)
        .sort(),
    ).toEqual(
      made
        .filter((m) => !m.deleted)
        .map((m) => m.id)
        .sort(),
    );
    const count = await t.call({
      method: 'POST',
      url: `/api/v1/logs/count?minPosition=${deletionAt}`,
      payload: { filter: [{ column: 'ownerId', value: owner }] },
    });
    expect(count.json()).toBe(100);
    for (const m of [made[0], made[1], made[2]]) {
      // Gone in each of its versions too (its history stays for auditors until the retention purges it).
      for (const path of ['', '/versions/0'])
        expect((await t.call({ method: 'GET', url: `/api/v1/logs/${m?.id ?? ''}${path}` })).statusCode, path).toBe(
          m?.deleted === true ? 404 : 200,
        );
    }
    expect((await t.call({ method: 'PUT', url: `/api/v1/logs/${made[0]?.id ?? ''}`, payload: aLog() })).statusCode).toBe(404);
    // Nothing more matches: a second deletion removes none.
    expect((await t.call({ method: 'DELETE', url })).json()).toEqual({ deleted: 0 });

    const deletions = await t.call({
      method: 'POST',
      url: `/api/v1/log-deletions/search?minPosition=${deletionAt}`,
      payload: { filter: [{ column: 'ownerId', value: owner }] },
    });
    expect(deletions.json<{ deleted: number }[]>().sort((a, b) => b.deleted - a.deleted)).toEqual([
      expect.objectContaining({
        logTypeCode: 'HTTP_OUT',
        ownerType: 'TICKET',
        ownerId: owner,
        deleted: 200,
        auditInfo: expect.objectContaining({ whoInserted: 'alice-admin' }),
      }),
      expect.objectContaining({ deleted: 0 }),
    ]);
    expect((await t.call({ method: 'POST', url: '/api/v1/log-deletions/search', payload: {}, as: 'editor' })).statusCode).toBe(403);
  });

  it('rebuilds the logs read model from the log into the same documents', async () => {
    await t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });
    const before = await readModelDocuments(t, 'logs');
    expect(before.filter((d) => d.ownerId === owner)).toHaveLength(100);
    await recreate('logs');
    expect(await readModelDocuments(t, 'logs')).toEqual(before);
  }, 60_000);

  it("purges the deleted logs' events after the retention period: the file shrinks, positions go on, the deletion stays", async () => {
    await t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });
    const deleted = made.filter((m) => m.deleted);
    const history = await t.call({ method: 'GET', url: `/api/v1/logs/${deleted[0]?.id ?? ''}/history` });
    expect(history.json<unknown[]>()).toHaveLength(1);
    // Not yet: the deletion is younger than the retention (1 day).
    await t.service.scheduler.tick();
    expect((await t.call({ method: 'GET', url: `/api/v1/logs/${deleted[0]?.id ?? ''}/history` })).json<unknown[]>()).toHaveLength(1);

    const bytesBefore = fileBytes();
    const headBefore = BigInt((await create(aLog())).at);
    const before = await readModelDocuments(t, 'logs');
    clock.advance(2 * 24 * HOUR);
    await t.service.scheduler.tick();
    const bytesAfter = fileBytes();
    expect(bytesAfter).toBeLessThan(bytesBefore - 200 * 3000 * 0.8);

    const gone = await t.call({ method: 'GET', url: `/api/v1/logs/${deleted[0]?.id ?? ''}/history` });
    expect(gone.statusCode, gone.body).toBe(404);
    expect((await t.call({ method: 'GET', url: `/api/v1/logs/${deleted[1]?.id ?? ''}` })).statusCode).toBe(404);
    const kept = made.find((m) => !m.deleted);
    expect((await t.call({ method: 'GET', url: `/api/v1/logs/${kept?.id ?? ''}` })).statusCode).toBe(200);
    const after = await create(aLog());
    expect(BigInt(after.at)).toBeGreaterThan(headBefore);

    const deletion = await t.call({
      method: 'POST',
      url: `/api/v1/log-deletions/search?minPosition=${after.at}`,
      payload: {
        filter: [
          { column: 'ownerId', value: owner },
          { column: 'deleted', operator: 'GT', value: '0' },
        ],
      },
    });
    expect(deletion.json()).toEqual([
      expect.objectContaining({ deleted: 200, purgedStreams: 200, purgedEvents: 200, purgedAt: expect.any(String) }),
    ]);

    // The read model is the same as before the purge (but for the log created since), and a rebuild
    // from the purged log gives it again.
    const now = await readModelDocuments(t, 'logs');
    expect(now.filter((d) => d.id !== after.log.id)).toEqual(before);
    // A purged log's id is not used again: its stream is empty, but the read model remembers the
    // deletion (a log made again there would be confirmed and never shown).
    const again = await t.call({ method: 'POST', url: '/api/v1/logs', payload: { ...aLog(), id: deleted[0]?.id } });
    expect(again.statusCode, again.body).toBe(409);
    expect(again.json()).toMatchObject({ code: 'LOG.ALREADY_EXISTS' });
    await recreate('logs');
    expect(await readModelDocuments(t, 'logs')).toEqual(now);
  }, 60_000);
});
