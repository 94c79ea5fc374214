// One caller cannot stall every template: each caller (the token's subject) has a bounded share of
// the interactive template threads (429 beyond it), so another caller's preview still starts at
// once; and notifications made by the trigger reactor render in a lane of their own, which no
// preview, by one caller or by many, can delay.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { WorkerTemplateRunner } from '../../../infra/templates/templateRunner.ts';
import { startTestApp, TEST_SECRET, type TestApp, type TestResponse } from '../../support/testApp.ts';

const TIMEOUT_MS = 3000;
const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';

let t: TestApp;
// Two threads and a queue of two: the many-callers case reaches the queue's limit with few jobs.
const templates = new WorkerTemplateRunner({ timeoutMs: TIMEOUT_MS, queueLimit: 2, jobsPerCaller: 2 });

beforeAll(async () => {
  t = await startTestApp({ documents: { templates } });
  expect(
    (await t.call({ method: 'POST', url: '/api/v1/notification-rules', payload: { code: 'SHARES', name: 'Shares', eventType: 'REST' } }))
      .statusCode,
  ).toBe(201);
  const template = {
    code: 'SHARES_INAPP',
    name: 'Shares',
    configTypeId,
    status: 'ACTIVE',
    notificationRuleCode: 'SHARES',
    deliveryType: 'APPLICATION',
    subject: 'Ticket {{ticket}}',
    content: '<p>{{ticket}} closed</p>',
  };
  expect((await t.call({ method: 'POST', url: '/api/v1/notification-templates', payload: template })).statusCode).toBe(201);
  // A service in use: both lanes have loaded their threads (a cold thread takes a second or more
  // to load the engines on a busy machine, once per process).
  expect((await t.call({ method: 'POST', url: '/api/v1/formatter/preview', payload: { content: 'warm' } })).body).toBe('warm');
  expect(await triggerProcessed('T-0')).toBe('PROCESSED');
  // The time limit (a setTimeout) on a clock that moves only when a test moves it: a heavy
  // template holds its thread until then, however fast or slow the machine, so what is answered
  // meanwhile did not wait for it.
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
});
afterAll(async () => {
  vi.useRealTimers();
  await t.close();
});

/** Waits on the real clock, which the fake one leaves alone. */
const realTimeout = globalThis.setTimeout;
const pause = (ms: number) => new Promise((resolve) => realTimeout(resolve, ms));

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
/** 3000³ iterations that write nothing: only the time limit ends them. */
const heavy = { content: '{{#each a}}{{#each ../a}}{{#each ../../a}}{{/each}}{{/each}}{{/each}}', data: { a: range(3000) } };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Heavy previews sent at once by the given tokens; `answered` counts those already answered. */
function attack(tokens: readonly string[]) {
  const state = { answered: 0 };
  const responses = Promise.all(
    tokens.map(async (token) => {
      const res = await t.call({ method: 'POST', url: '/api/v1/formatter/preview', payload: heavy, as: null, headers: bearer(token) });
      state.answered += 1;
      return res;
    }),
  );
  return { state, responses };
}

/** Until every attacking request is either answered or in the interactive lane (running or waiting). */
async function inPlace(state: { answered: number }, total: number): Promise<void> {
  for (;;) {
    const { running, waiting } = templates.load.interactive;
    if (state.answered + running + waiting === total) return;
    await pause(10);
  }
}

/** Moves the clock past the time limit of each heavy template in turn (a waiting one starts when
 * one ahead of it is stopped) until every attacking request is answered. */
async function runOut(state: { answered: number }, total: number): Promise<void> {
  while (state.answered < total) {
    await vi.advanceTimersByTimeAsync(TIMEOUT_MS);
    await pause(10);
  }
}

/** From a REST trigger to its PROCESSED outcome. */
async function triggerProcessed(ticket: string): Promise<string> {
  const res = await t.call({
    method: 'POST',
    url: '/api/v1/notification-rules/SHARES/trigger',
    payload: { ownerType: 'TICKET', ownerId: ticket, data: { ticket } },
  });
  expect(res.statusCode, res.body).toBe(202);
  const { triggerId } = res.json<{ triggerId: string }>();
  for (;;) {
    const status = (await t.call({ method: 'GET', url: `/api/v1/notification-triggers/${triggerId}` })).json<{ status: string }>().status;
    if (status !== 'RECEIVED') return status;
    await pause(20);
  }
}

const codes = (responses: readonly TestResponse[]) =>
  responses.map((r) => `${String(r.statusCode)} ${r.json<{ code: string }>().code}`).sort();

describe('template work under attack', () => {
  it("one viewer's twelve heavy previews leave an admin's preview and a trigger to run meanwhile; beyond its share the viewer gets 429", async () => {
    const { state, responses } = attack(Array.from({ length: 12 }, () => t.tokens.viewer));
    await inPlace(state, 12);
    const [preview, trigger] = await Promise.all([
      t.call({ method: 'POST', url: '/api/v1/formatter/preview', payload: { content: '<p>{{name}}</p>', data: { name: 'admin' } } }),
      triggerProcessed('T-1'),
    ]);
    expect(preview.body).toBe('<p>admin</p>');
    expect(trigger).toBe('PROCESSED');
    // Both answered while the viewer's share still held its place: only the ten refusals are answered.
    expect(state.answered).toBe(10);
    await runOut(state, 12);
    const answers = await responses;
    // The two of its share ran to the time limit; the other ten were refused at once.
    expect(codes(answers)).toEqual(
      [
        ...Array<string>(10).fill('429 FORMATTER.TOO_MANY_RENDERS_OF_CALLER'),
        ...Array<string>(2).fill('422 FORMATTER.RENDER_FAILED'),
      ].sort(),
    );
    const refused = answers.find((r) => r.statusCode === 429);
    expect(Number(refused?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(refused?.json()).toMatchObject({ status: 'TOO_MANY_REQUESTS', message: expect.stringContaining('at most 2') as string });
  });

  it('many viewers fill the interactive lane up to its queue (503), and a trigger still runs meanwhile', async () => {
    const viewers = await Promise.all(range(5).map((i) => signHs256(TEST_SECRET, { sub: `viewer-${String(i)}`, roles: ['viewer'] })));
    const { state, responses } = attack(viewers);
    await inPlace(state, 5);
    expect(await triggerProcessed('T-2')).toBe('PROCESSED');
    // Processed while the lane was still full: only the refusal is answered.
    expect(state.answered).toBe(1);
    await runOut(state, 5);
    const answers = await responses;
    // Two threads and two places in the queue: the fifth is refused as busy.
    expect(codes(answers)).toEqual([
      '422 FORMATTER.RENDER_FAILED',
      '422 FORMATTER.RENDER_FAILED',
      '422 FORMATTER.RENDER_FAILED',
      '422 FORMATTER.RENDER_FAILED',
      '503 FORMATTER.RENDERER_BUSY',
    ]);
    expect(Number(answers.find((r) => r.statusCode === 503)?.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  });
});

describe('notification triggers under attack', () => {
  it("an editor's six triggers of a heavy template leave an admin's trigger to run meanwhile; each of them FAILS at the time limit", async () => {
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/notification-rules',
          as: 'editor',
          payload: { code: 'HEAVY', name: 'Heavy', eventType: 'REST' },
        })
      ).statusCode,
    ).toBe(201);
    const template = {
      code: 'HEAVY_INAPP',
      name: 'Heavy',
      configTypeId,
      status: 'ACTIVE',
      notificationRuleCode: 'HEAVY',
      deliveryType: 'APPLICATION',
      content: heavy.content,
    };
    expect((await t.call({ method: 'POST', url: '/api/v1/notification-templates', as: 'editor', payload: template })).statusCode).toBe(201);
    const attacks = await Promise.all(
      range(6).map(async (i) => {
        const res = await t.call({
          method: 'POST',
          url: '/api/v1/notification-rules/HEAVY/trigger',
          as: 'editor',
          payload: { ownerType: 'TICKET', ownerId: `H-${String(i)}`, data: heavy.data },
        });
        expect(res.statusCode, res.body).toBe(202);
        return res.json<{ triggerId: string }>().triggerId;
      }),
    );
    const status = async (id: string) =>
      (await t.call({ method: 'GET', url: `/api/v1/notification-triggers/${id}` })).json<{ status: string; reason?: string }>();
    // The editor's triggers hold the service lane (their time limit waits for the fake clock).
    while (templates.load.service.running === 0) await pause(10);
    expect(await triggerProcessed('T-3')).toBe('PROCESSED');
    // Processed while the editor's heavy templates still held their threads: none of them ended.
    expect(templates.load.service.running).toBeGreaterThan(0);
    expect((await Promise.all(attacks.map(status))).map((s) => s.status)).toEqual(Array<string>(6).fill('RECEIVED'));
    // Each heavy trigger ends FAILED with the time limit as its reason, as it would alone.
    for (;;) {
      const found = await Promise.all(attacks.map(status));
      if (found.every((s) => s.status !== 'RECEIVED')) {
        for (const s of found) {
          expect(s.status).toBe('FAILED');
          expect(s.reason).toContain('was stopped');
        }
        break;
      }
      await vi.advanceTimersByTimeAsync(TIMEOUT_MS);
      await pause(20);
    }
  });
});
