// Notification rules triggered over REST and by domain events (SYSTEM rules): the trigger is in the
// log before the 202, the rule's ACTIVE templates each make one notification for the targets (the
// owner when none), the trigger records its outcome, and nothing is made twice (a repeated
// Idempotency-Key, a restart of the reactors over the same log). evalNotificationUrl goes through
// the real guarded client to a local server: refused unless allow-listed.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGuardedClient } from '../../../infra/http/guardedClient.ts';
import { manualClock, startTestApp, type TestApp } from '../../support/testApp.ts';

const clock = manualClock(new Date('2026-11-23T10:00:00.000Z'));
const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
let t: TestApp;

type Trigger = {
  id: string;
  status: string;
  ruleCode: string;
  source: string;
  notificationIds?: string[];
  problems?: string[];
  reason?: string;
};
type Notification = {
  id: string;
  status: string;
  templateCode: string;
  subject?: string;
  contents?: string;
  ownerType: string;
  ownerId: string;
  notificationTo: unknown[];
};

const post = async (url: string, payload: unknown, headers: Record<string, string> = {}) =>
  t.call({ method: 'POST', url, payload, headers });

// Waits poll until the work is seen done; the deadline only bounds how long a failure takes (a
// loaded machine may take seconds to run a reactor), so it is wall-clock time, not a count of tries.
const WAIT_MS = 30_000;
const waiting = () => {
  const deadline = Date.now() + WAIT_MS;
  return () => Date.now() < deadline;
};

async function settledTrigger(app: TestApp, id: string): Promise<Trigger> {
  for (const more = waiting(); more();) {
    const res = await app.call({ method: 'GET', url: `/api/v1/notification-triggers/${id}` });
    if (res.statusCode === 200 && res.json<Trigger>().status !== 'RECEIVED') return res.json<Trigger>();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`trigger ${id} was not processed`);
}

const notificationsOf = async (app: TestApp, ids: readonly string[]) =>
  (await app.call({ method: 'POST', url: '/api/v1/notifications/by-ids', payload: ids })).json<Notification[]>();

async function triggersOf(app: TestApp, ruleCode: string, count: number): Promise<Trigger[]> {
  for (const more = waiting(); more();) {
    const res = await app.call({
      method: 'POST',
      url: '/api/v1/notification-triggers/search',
      payload: { filter: [{ column: 'ruleCode', operator: 'EQ', value: ruleCode }] },
    });
    const found = res.json<Trigger[]>();
    if (found.length >= count && found.every((x) => x.status !== 'RECEIVED')) return found;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`fewer than ${String(count)} processed triggers of ${ruleCode}`);
}

/** The guarded client as npm start makes it, nothing allow-listed. */
const startMain = (dataDir?: string) =>
  startTestApp({ clock, ...(dataDir === undefined ? {} : { dataDir }), extra: { outbound: createGuardedClient({ allow: [] }) } });

/** The microservice evalNotificationUrl asks: how many requests it saw. */
let backend: Server;
let backendUrl: string;
let backendHits = 0;

beforeAll(async () => {
  backend = createServer((req, res) => {
    backendHits++;
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ ticket: 'FROM-BACKEND', note: `asked ${String(req.url)}`, name: 'Backend' }));
  });
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  backendUrl = `http://127.0.0.1:${String((backend.address() as AddressInfo).port)}`;
  t = await startMain();
  const rules = [
    { code: 'TICKET_CLOSED', eventType: 'REST' },
    { code: 'FROM_KAFKA', eventType: 'KAFKA' },
    { code: 'EXPIRED_RULE', eventType: 'REST', validityTo: '2026-01-01T00:00:00Z' },
    { code: 'EMPTY', eventType: 'DIRECT' },
    { code: 'WELCOME', eventType: 'SYSTEM', config: { eventTypes: ['UserCreated'] } },
  ];
  for (const rule of rules) expect((await post('/api/v1/notification-rules', { name: rule.code, ...rule })).statusCode).toBe(201);
  const templates = [
    {
      code: 'CLOSED_INAPP',
      notificationRuleCode: 'TICKET_CLOSED',
      deliveryType: 'APPLICATION',
      subject: 'Ticket {{ticket}} closed',
      content: '<p>{{note}}</p>',
    },
    {
      code: 'CLOSED_MAIL',
      notificationRuleCode: 'TICKET_CLOSED',
      deliveryType: 'EMAIL',
      subject: 'Closed: {{ticket}}',
      content: 'Dear {{name}}',
    },
    { code: 'CLOSED_OLD', notificationRuleCode: 'TICKET_CLOSED', deliveryType: 'EMAIL', status: 'INACTIVE', subject: 'never' },
    {
      code: 'WELCOME_MAIL',
      notificationRuleCode: 'WELCOME',
      deliveryType: 'APPLICATION',
      subject: 'Welcome {{record.givenName}}',
      content: 'Your login is {{record.code}}',
    },
  ];
  for (const tpl of templates)
    expect((await post('/api/v1/notification-templates', { name: tpl.code, configTypeId, status: 'ACTIVE', ...tpl })).statusCode).toBe(201);
  expect((await post('/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' })).statusCode).toBe(201);
});
afterAll(async () => {
  await t.close();
  await new Promise<void>((resolve) => {
    backend.close(() => {
      resolve();
    });
  });
});

describe('REST triggers', () => {
  it("answer 202 with the trigger, whose rule's ACTIVE templates each make a notification for the targets", async () => {
    const res = await post('/api/v1/notification-rules/TICKET_CLOSED/trigger', {
      ownerType: 'TICKET',
      ownerId: 'T-7',
      data: { ticket: 'T-7', note: '<b>fixed</b>', name: 'Ada' },
      targets: [{ email: 'ada@example.com' }],
    });
    expect(res.statusCode, res.body).toBe(202);
    const { triggerId } = res.json<{ triggerId: string }>();
    expect(res.headers.location).toBe(`/api/v1/notification-triggers/${triggerId}`);
    const trigger = await settledTrigger(t, triggerId);
    expect(trigger).toMatchObject({ status: 'PROCESSED', ruleCode: 'TICKET_CLOSED', source: 'REST' });
    expect(trigger.notificationIds).toHaveLength(2);
    const made = await notificationsOf(t, trigger.notificationIds ?? []);
    // (The scheduler may have delivered them already.)
    expect(made.map((n) => [n.templateCode, n.subject]).sort()).toEqual([
      ['CLOSED_INAPP', 'Ticket T-7 closed'],
      ['CLOSED_MAIL', 'Closed: T-7'],
    ]);
    expect(made.find((n) => n.templateCode === 'CLOSED_INAPP')?.contents).toBe('<p>&lt;b&gt;fixed&lt;/b&gt;</p>');
    expect(made.every((n) => n.ownerType === 'TICKET' && n.ownerId === 'T-7')).toBe(true);
    // The trigger's history: received, then processed by the reactor.
    const history = (await t.call({ method: 'GET', url: `/api/v1/notification-triggers/${triggerId}/history` })).json<
      { type: string; actor: string }[]
    >();
    expect(history.map((h) => h.type)).toEqual(['NotificationTriggered', 'NotificationTriggerProcessed']);
    expect(history[1]?.actor).toBe('reactor:notification-triggers');
  });

  it('address the owner when no target is given', async () => {
    const res = await post('/api/v1/notification-rules/TICKET_CLOSED/trigger', {
      ownerType: 'USER',
      ownerId: 'someone',
      data: { ticket: 'T-8' },
    });
    const trigger = await settledTrigger(t, res.json<{ triggerId: string }>().triggerId);
    const made = await notificationsOf(t, trigger.notificationIds ?? []);
    expect(made.map((n) => n.notificationTo)).toEqual([
      [{ ownerType: 'USER', ownerId: 'someone' }],
      [{ ownerType: 'USER', ownerId: 'someone' }],
    ]);
  });

  it('honour Idempotency-Key: the same key and body answer the same trigger, which made its notifications once', async () => {
    const body = { ownerType: 'TICKET', ownerId: 'T-9', data: { ticket: 'T-9' } };
    const first = await post('/api/v1/notification-rules/TICKET_CLOSED/trigger', body, { 'idempotency-key': 'close-T-9' });
    const again = await post('/api/v1/notification-rules/TICKET_CLOSED/trigger', body, { 'idempotency-key': 'close-T-9' });
    expect(again.statusCode).toBe(202);
    expect(again.json()).toEqual(first.json());
    await settledTrigger(t, first.json<{ triggerId: string }>().triggerId);
    const byOwner = (
      await t.call({ method: 'GET', url: '/api/v1/notifications/by-owner?ownerType=TICKET&ownerId=T-9&minPosition=0' })
    ).json<Notification[]>();
    expect(byOwner).toHaveLength(2);
  });

  it('refuse unknown rules (404), rules of another event type or not valid now (422), and bad bodies (400)', async () => {
    const body = { ownerType: 'TICKET', ownerId: 'T-1' };
    const unknown = await post('/api/v1/notification-rules/NOPE/trigger', body);
    expect(unknown.statusCode).toBe(404);
    const kafka = await post('/api/v1/notification-rules/FROM_KAFKA/trigger', body);
    expect(kafka.statusCode).toBe(422);
    expect(kafka.json<{ errors: string[] }>().errors).toEqual(['eventType: KAFKA is not REST or DIRECT']);
    expect((await post('/api/v1/notification-rules/EXPIRED_RULE/trigger', body)).statusCode).toBe(422);
    expect((await post('/api/v1/notification-rules/TICKET_CLOSED/trigger', { ownerType: 'TICKET' })).statusCode).toBe(400);
    expect((await post('/api/v1/notification-rules/TICKET_CLOSED/trigger', { ...body, extra: 1 })).statusCode).toBe(400);
    expect(
      (await t.call({ as: 'viewer', method: 'POST', url: '/api/v1/notification-rules/TICKET_CLOSED/trigger', payload: body })).statusCode,
    ).toBe(403);
  });

  it('record FAILED with the reason when the rule has no ACTIVE template', async () => {
    const res = await post('/api/v1/notification-rules/EMPTY/trigger', { ownerType: 'TICKET', ownerId: 'T-2' });
    expect(res.statusCode).toBe(202);
    const trigger = await settledTrigger(t, res.json<{ triggerId: string }>().triggerId);
    expect(trigger).toMatchObject({ status: 'FAILED', reason: 'notification rule EMPTY has no ACTIVE template' });
  });
});

describe('SYSTEM rules', () => {
  it('fire once for each domain event their config lists, with the record as data, across a restart', async () => {
    for (const code of ['new-1', 'new-2']) {
      const res = await post('/api/v1/users', {
        code,
        type: 'INDIVIDUAL',
        chars: {},
        givenName: `Given ${code}`,
        familyName: 'Tester',
        email: `${code}@example.com`,
      });
      expect(res.statusCode, res.body).toBe(201);
    }
    const triggers = await triggersOf(t, 'WELCOME', 2);
    expect(triggers.map((x) => [x.source, x.status])).toEqual([
      ['SYSTEM', 'PROCESSED'],
      ['SYSTEM', 'PROCESSED'],
    ]);
    const made = await notificationsOf(
      t,
      triggers.flatMap((x) => x.notificationIds ?? []),
    );
    expect(made.map((n) => n.subject).sort()).toEqual(['Welcome Given new-1', 'Welcome Given new-2']);
    expect(made.map((n) => n.contents).sort()).toEqual(['Your login is new-1', 'Your login is new-2']);
    expect(made.every((n) => n.ownerType === 'USER')).toBe(true);

    // The reactors start again from their checkpoints over the same log: nothing is made twice.
    await t.close({ keepData: true });
    t = await startMain(t.dataDir);
    const res = await post('/api/v1/users', { code: 'new-3', type: 'INDIVIDUAL', chars: {}, givenName: 'Third', familyName: 'Tester' });
    expect(res.statusCode).toBe(201);
    const after = await triggersOf(t, 'WELCOME', 3);
    expect(after).toHaveLength(3);
    const all = (
      await t.call({
        method: 'POST',
        url: '/api/v1/notifications/search?minPosition=0',
        payload: { filter: [{ column: 'templateCode', operator: 'EQ', value: 'WELCOME_MAIL' }] },
      })
    ).json<Notification[]>();
    expect(all).toHaveLength(3);
  });
});

describe('evalNotificationUrl', () => {
  const ruleWith = async (app: TestApp, code: string, url: string, extra: Record<string, unknown> = {}) => {
    expect(
      (
        await app.call({
          method: 'POST',
          url: '/api/v1/notification-rules',
          payload: { code, name: code, eventType: 'REST', evalNotificationUrl: url, ...extra },
        })
      ).statusCode,
    ).toBe(201);
    const template = {
      code: `${code}_T`,
      name: code,
      configTypeId,
      status: 'ACTIVE',
      notificationRuleCode: code,
      deliveryType: 'APPLICATION',
      subject: '{{ticket}} by {{name}}',
      content: '{{note}}',
    };
    expect((await app.call({ method: 'POST', url: '/api/v1/notification-templates', payload: template })).statusCode).toBe(201);
  };
  const fire = async (app: TestApp, code: string, data: Record<string, unknown> = {}) => {
    const res = await app.call({
      method: 'POST',
      url: `/api/v1/notification-rules/${code}/trigger`,
      payload: { ownerType: 'TICKET', ownerId: 'T-3', data },
    });
    expect(res.statusCode, res.body).toBe(202);
    return settledTrigger(app, res.json<{ triggerId: string }>().triggerId);
  };

  it('is refused for loopback, link-local and private addresses unless allow-listed, failing the trigger with the reason', async () => {
    const hits = backendHits;
    await ruleWith(t, 'LOOPBACK', `${backendUrl}/tickets/T-3`);
    await ruleWith(t, 'METADATA', 'http://169.254.169.254/latest/meta-data/');
    await ruleWith(t, 'PRIVATE', 'http://10.0.0.1/tickets');
    expect(await fire(t, 'LOOPBACK')).toMatchObject({
      status: 'FAILED',
      reason: `evalNotificationUrl ${backendUrl}/tickets/T-3: refused: 127.0.0.1 is a loopback address (allow it in OUTBOUND_ALLOW)`,
    });
    expect((await fire(t, 'METADATA')).reason).toContain('169.254.169.254 is a link-local address');
    expect((await fire(t, 'PRIVATE')).reason).toContain('10.0.0.1 is a private address');
    expect(backendHits).toBe(hits);
  });

  it("gathers data from an allow-listed address, the trigger's own data over it; a relative URL goes to its microservice", async () => {
    const app = await startTestApp({
      clock,
      extra: {
        outbound: createGuardedClient({ allow: ['127.0.0.1/32'] }),
        settings: { notifications: { microserviceUrls: { tickets: `${backendUrl}/api/` } } },
      },
    });
    try {
      await ruleWith(app, 'GATHER', `${backendUrl}/tickets/T-3`);
      const trigger = await fire(app, 'GATHER', { name: 'Caller' });
      expect(trigger.status, trigger.reason).toBe('PROCESSED');
      const [made] = await notificationsOf(app, trigger.notificationIds ?? []);
      expect(made).toMatchObject({ subject: 'FROM-BACKEND by Caller', contents: 'asked /tickets/T-3' });

      await ruleWith(app, 'RELATIVE', '/tickets/T-4', { microserviceCode: 'tickets' });
      const relative = await fire(app, 'RELATIVE');
      const [fromRelative] = await notificationsOf(app, relative.notificationIds ?? []);
      expect(fromRelative?.contents).toBe('asked /api/tickets/T-4');

      await ruleWith(app, 'NOBASE', '/tickets/T-5', { microserviceCode: 'unknown' });
      expect((await fire(app, 'NOBASE')).reason).toBe(
        'evalNotificationUrl /tickets/T-5 is relative and MICROSERVICE_URLS has no base for microservice unknown',
      );
    } finally {
      await app.close();
    }
  });
});
