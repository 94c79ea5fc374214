// Delivery of notifications against a real SMTP server (smtp-server, messages read back with
// mailparser): e-mail with the rendered subject, body and attachments to given addresses and to
// users (disabled ones skipped with the reason); an SMTP 451 tried again with backoff, then
// delivered; a 550 failed at once; in-app SENT on record; letters failed as unsupported; SMS posted to
// an HTTP gateway (a local server), a 503 tried again, a 400 failed; without a gateway or SMTP_URL,
// failed with the reason;
// no SMTP_URL failed saying so; a restart loses no pending delivery and sends nothing twice.

import { simpleParser, type ParsedMail } from 'mailparser';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:http';
import { SmtpMailSender } from '../../../infra/mail/smtpSender.ts';
import { HttpSmsGateway } from '../../../infra/sms/httpSmsGateway.ts';
import { manualClock, startTestApp, type TestApp } from '../../support/testApp.ts';

const clock = manualClock(new Date('2026-11-23T10:00:00.000Z'));
const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
const received: ParsedMail[] = [];
/** Answers to RCPT TO per address, used up in order (then accepted). */
const answers = new Map<string, number[]>();
const rcptSeen: string[] = [];
let smtp: SMTPServer;
let smtpUrl: string;
let t: TestApp;

type Notification = { id: string; status: string; attempts?: number; lastError?: string; nextAttemptAt?: string };

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onRcptTo(address, _session, callback) {
      rcptSeen.push(address.address);
      const code = answers.get(address.address)?.shift();
      if (code === undefined) {
        callback();
        return;
      }
      callback(Object.assign(new Error(code >= 500 ? 'mailbox unavailable' : 'try again later'), { responseCode: code }));
    },
    onData(stream, _session, callback) {
      simpleParser(stream).then(
        (mail) => {
          received.push(mail);
          callback();
        },
        (error: unknown) => {
          callback(error as Error);
        },
      );
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  smtpUrl = `smtp://127.0.0.1:${String((smtp.server.address() as AddressInfo).port)}`;
  t = await startApp();
  const templates = [
    { code: 'MAIL', deliveryType: 'EMAIL', subject: 'Ticket {{ticket}} closed', content: '<p>Dear {{name}}</p>', from: 'noc@example.com' },
    { code: 'INAPP', deliveryType: 'APPLICATION', subject: 'In app', content: 'hello' },
    { code: 'LETTER', deliveryType: 'LETTER', subject: 'Letter', content: 'paper' },
    { code: 'TEXT', deliveryType: 'SMS', subject: 'SMS', content: 'short' },
  ];
  for (const tpl of templates)
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/notification-templates',
          payload: { name: tpl.code, configTypeId, status: 'ACTIVE', ...tpl },
        })
      ).statusCode,
    ).toBe(201);
  expect(
    (await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } }))
      .statusCode,
  ).toBe(201);
  for (const [code, status] of [
    ['ada', 'ENABLE'],
    ['bob', 'DISABLE'],
  ] as const) {
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code, type: 'INDIVIDUAL', chars: {}, givenName: code, familyName: 'Tester', email: `${code}@example.com`, status },
    });
    expect(res.statusCode, res.body).toBe(201);
  }
});
afterAll(async () => {
  await t.close();
  await new Promise<void>((resolve) => {
    smtp.close(resolve);
  });
});

function startApp(dataDir?: string, withMail = true): Promise<TestApp> {
  return startTestApp({
    clock,
    ...(dataDir === undefined ? {} : { dataDir }),
    ...(withMail ? { mail: new SmtpMailSender({ url: smtpUrl, timeoutMs: 5000 }) } : {}),
  });
}

const create = async (app: TestApp, body: Record<string, unknown>) => {
  const res = await app.call({
    method: 'POST',
    url: '/api/v1/notifications',
    payload: { ownerType: 'TICKET', ownerId: 'T-1', data: { ticket: 'T-1', name: 'Ada' }, ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<Notification>().id;
};
const get = async (app: TestApp, id: string) =>
  (await app.call({ method: 'GET', url: `/api/v1/notifications/${id}` })).json<Notification>();
/** Ticks the scheduler until the notification reaches one of the states (the read model folds between). */
async function settle(app: TestApp, id: string, states: readonly string[], advanceMs = 0): Promise<Notification> {
  for (let i = 0; i < 60; i++) {
    const n = await get(app, id);
    if (states.includes(n.status)) return n;
    if (advanceMs > 0) clock.advance(advanceMs);
    await app.service.scheduler.tick();
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  return get(app, id);
}
type HistoryEntry = { type: string; actor: string };
const history = async (app: TestApp, id: string) =>
  (await app.call({ method: 'GET', url: `/api/v1/notifications/${id}/history` })).json<HistoryEntry[]>();

describe('e-mail', () => {
  it('arrives with the rendered subject, body and attachments, to given addresses and active users; a disabled user is skipped with the reason', async () => {
    const pdf = Buffer.from('%PDF-1.4\n% a test\n%%EOF\n');
    const id = await create(t, {
      templateCode: 'MAIL',
      notificationTo: [{ email: 'grace@example.com' }, { ownerType: 'USER', ownerId: 'ada' }, { ownerType: 'USER', ownerId: 'bob' }],
      attachments: [{ name: 'invoice.pdf', mimeType: 'application/pdf', data: pdf.toString('base64') }],
    });
    const n = await settle(t, id, ['SENT', 'FAILED']);
    expect(n).toMatchObject({ status: 'SENT', attempts: 1 });
    const mail = received.find((m) => m.messageId === `<${id}@notifications.admin>`);
    expect(mail?.subject).toBe('Ticket T-1 closed');
    expect(mail?.html).toContain('<p>Dear Ada</p>');
    expect(mail?.from?.text).toBe('noc@example.com');
    expect((Array.isArray(mail?.to) ? mail.to : [mail?.to]).flatMap((a) => a?.value.map((v) => v.address) ?? [])).toEqual([
      'grace@example.com',
      'ada@example.com',
    ]);
    expect(mail?.attachments.map((a) => [a.filename, a.contentType, a.content.equals(pdf)])).toEqual([
      ['invoice.pdf', 'application/pdf', true],
    ]);
    const entries = await history(t, id);
    expect(entries.map((e) => e.type)).toEqual([
      'NotificationCreated',
      'NotificationStateChanged',
      'NotificationDeliveryAttempted',
      'NotificationStateChanged',
    ]);
    expect(entries.slice(1).every((e) => e.actor === 'system:notification-dispatcher')).toBe(true);
    const sent = (await t.call({ method: 'GET', url: `/api/v1/notifications/${id}/versions/3` })).json<{ status: string }>();
    expect(sent.status).toBe('SENT');
    const reason = JSON.stringify(await t.call({ method: 'GET', url: `/api/v1/notifications/${id}/history` }).then((r) => r.json()));
    expect(reason).toContain('skipped: user bob: disabled or not valid now');
  });

  it('tries an SMTP 451 again with backoff and then delivers; fails a 550 at once with the reason', async () => {
    answers.set('flaky@example.com', [451, 451]);
    const flaky = await create(t, { templateCode: 'MAIL', notificationTo: [{ email: 'flaky@example.com' }] });
    const deferred = await settle(t, flaky, ['SENT', 'FAILED'], 10 * 60_000);
    expect(deferred).toMatchObject({ status: 'SENT', attempts: 3 });
    expect(rcptSeen.filter((a) => a === 'flaky@example.com')).toHaveLength(3);
    expect(received.filter((m) => m.messageId === `<${flaky}@notifications.admin>`)).toHaveLength(1);
    const types = (await history(t, flaky)).map((e) => e.type);
    expect(types.filter((x) => x === 'NotificationDeliveryDeferred')).toHaveLength(2);

    answers.set('gone@example.com', [550]);
    const gone = await create(t, { templateCode: 'MAIL', notificationTo: [{ email: 'gone@example.com' }] });
    const failed = await settle(t, gone, ['SENT', 'FAILED']);
    expect(failed).toMatchObject({ status: 'FAILED', attempts: 1 });
    expect(failed.lastError).toMatch(/^SMTP 550: .*\(permanent, attempt 1\)$/);
  });
});

describe('recipients and preferences', () => {
  it("reach a group's members, skipping those who ignore the group or the template, with the reasons", async () => {
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } })).statusCode,
    ).toBe(201);
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'OPS', name: 'Operations', type: 'TEAM', chars: {} } }))
        .statusCode,
    ).toBe(201);
    const members = [
      ['carol', {}],
      ['dave', { notificationConfig: { ignoredUserGroups: ['OPS'] } }],
      ['erin', { notificationConfig: { ignoredTemplateCodes: ['MAIL'] } }],
      ['fred', { status: 'DISABLE' }],
    ] as const;
    let position = '';
    for (const [code, extra] of members) {
      const res = await t.call({
        method: 'POST',
        url: '/api/v1/users',
        payload: {
          code,
          type: 'INDIVIDUAL',
          chars: {},
          givenName: code,
          familyName: 'Tester',
          email: `${code}@example.com`,
          groups: ['OPS'],
          ...extra,
        },
      });
      expect(res.statusCode, res.body).toBe(201);
      position = String(res.headers['x-event-position']);
    }
    // The dispatcher reads members from the users read model: let it catch up first.
    await t.call({ method: 'POST', url: `/api/v1/users/search?minPosition=${position}`, payload: { filter: [] } });
    // A group named many times is one target: each member once, each skip once.
    const id = await create(t, {
      templateCode: 'MAIL',
      notificationTo: [
        ...Array.from({ length: 50 }, () => ({ ownerType: 'USER_GROUP', ownerId: 'OPS' })),
        { ownerType: 'USER_GROUP', ownerId: 'NOPE' },
      ],
    });
    expect((await settle(t, id, ['SENT', 'FAILED'])).status).toBe('SENT');
    const mail = received.find((m) => m.messageId === `<${id}@notifications.admin>`);
    expect((Array.isArray(mail?.to) ? mail.to : [mail?.to]).flatMap((a) => a?.value.map((v) => v.address) ?? [])).toEqual([
      'carol@example.com',
    ]);
    const log = JSON.stringify((await t.call({ method: 'GET', url: `/api/v1/notifications/${id}/history` })).json());
    for (const reason of [
      'user dave of group OPS: ignores group OPS',
      'user erin of group OPS: ignores template MAIL',
      'user fred of group OPS: disabled or not valid now',
      'group NOPE: not found',
    ]) {
      expect(log.split(reason)).toHaveLength(2);
    }
  });
});

describe('races', () => {
  it('sends nothing for a notification a client moved on after the dispatcher last read it', async () => {
    // The scheduler runs only when told, so the client's move comes between two of its ticks.
    const app = await startTestApp({
      clock,
      mail: new SmtpMailSender({ url: smtpUrl, timeoutMs: 5000 }),
      extra: { manualScheduler: true },
    });
    try {
      expect(
        (
          await app.call({
            method: 'POST',
            url: '/api/v1/notification-templates',
            payload: { code: 'MAIL', name: 'm', configTypeId, status: 'ACTIVE', deliveryType: 'EMAIL', subject: 's', content: 'x' },
          })
        ).statusCode,
      ).toBe(201);
      const id = await create(app, { templateCode: 'MAIL', notificationTo: [{ email: 'late@example.com' }] });
      // The dispatcher takes it (SENDING, due at once) ...
      await app.call({ method: 'POST', url: '/api/v1/notifications/search?minPosition=0', payload: { filter: [] } });
      for (let i = 0; i < 20 && (await get(app, id)).status !== 'SENDING'; i++) {
        await app.service.scheduler.tick();
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await get(app, id)).status).toBe('SENDING');
      // ... and an editor fails it before the attempt.
      expect(
        (await app.call({ method: 'PUT', url: `/api/v1/notifications/${id}/state?newState=FAILED&reason=wrong%20address`, as: 'editor' }))
          .statusCode,
      ).toBe(204);
      for (let i = 0; i < 3; i++) await app.service.scheduler.tick();
      expect(received.filter((m) => m.messageId === `<${id}@notifications.admin>`)).toHaveLength(0);
      expect(await get(app, id)).toMatchObject({ status: 'FAILED', lastError: 'wrong address' });
    } finally {
      await app.close();
    }
  });
});

describe('other channels and no SMTP', () => {
  it('finishes an in-app notification a client left SENDING', async () => {
    // The scheduler runs only when told, so the client's move comes before the dispatcher takes it
    // (which moves an in-app one on to SENT in the same change).
    const app = await startTestApp({ clock, extra: { manualScheduler: true } });
    try {
      expect(
        (
          await app.call({
            method: 'POST',
            url: '/api/v1/notification-templates',
            payload: {
              code: 'INAPP',
              name: 'INAPP',
              configTypeId,
              status: 'ACTIVE',
              deliveryType: 'APPLICATION',
              subject: 'In app',
              content: 'hello',
            },
          })
        ).statusCode,
      ).toBe(201);
      const stranded = await create(app, { templateCode: 'INAPP', notificationTo: [{ ownerType: 'TICKET', ownerId: 'T-1' }] });
      expect((await app.call({ method: 'PUT', url: `/api/v1/notifications/${stranded}/state?newState=SENDING` })).statusCode).toBe(204);
      expect(await settle(app, stranded, ['SENT', 'FAILED'])).toMatchObject({ status: 'SENT' });
    } finally {
      await app.close();
    }
  });

  it('records in-app ones SENT, fails letters and SMS with the reason, and e-mail without SMTP_URL', async () => {
    const inApp = await settle(t, await create(t, { templateCode: 'INAPP', notificationTo: [{ ownerType: 'USER', ownerId: 'ada' }] }), [
      'SENT',
      'FAILED',
    ]);
    expect(inApp.status).toBe('SENT');
    const letter = await settle(t, await create(t, { templateCode: 'LETTER', notificationTo: [{ ownerType: 'USER', ownerId: 'ada' }] }), [
      'SENT',
      'FAILED',
    ]);
    expect(letter).toMatchObject({ status: 'FAILED', lastError: 'unsupported: letters are not delivered by this service' });
    const sms = await settle(t, await create(t, { templateCode: 'TEXT', notificationTo: [{ phone: '+420123456789' }] }), [
      'SENT',
      'FAILED',
    ]);
    expect(sms.lastError).toContain('SMS_GATEWAY_URL is not set');

    const bare = await startTestApp({ clock });
    try {
      expect(
        (
          await bare.call({
            method: 'POST',
            url: '/api/v1/notification-templates',
            payload: { code: 'MAIL', name: 'm', configTypeId, status: 'ACTIVE', deliveryType: 'EMAIL', content: 'x' },
          })
        ).statusCode,
      ).toBe(201);
      const n = await settle(bare, await create(bare, { templateCode: 'MAIL', notificationTo: [{ email: 'x@example.com' }] }), [
        'SENT',
        'FAILED',
      ]);
      expect(n).toMatchObject({ status: 'FAILED', lastError: 'SMTP_URL is not set: e-mail cannot be delivered' });
    } finally {
      await bare.close();
    }
  });
});

describe('SMS through an HTTP gateway', () => {
  it('posts the text to the phone numbers, tries a 503 again and then delivers, fails a 400 at once', async () => {
    const posted: { body: { messageId: string; to: string[]; text: string }; key: string | undefined }[] = [];
    const statuses = [503];
    const gateway = createServer((req, res) => {
      let raw = '';
      req.on('data', (chunk: Buffer) => (raw += chunk.toString('utf8')));
      req.on('end', () => {
        const body = JSON.parse(raw) as { messageId: string; to: string[]; text: string };
        posted.push({ body, key: req.headers['idempotency-key'] as string | undefined });
        res.writeHead(body.to.includes('+420999999999') ? 400 : (statuses.shift() ?? 202)).end('{}');
      });
    });
    await new Promise<void>((resolve) => gateway.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${String((gateway.address() as AddressInfo).port)}/sms`;
    const app = await startTestApp({ clock, extra: { sms: new HttpSmsGateway({ url, timeoutMs: 5000 }) } });
    try {
      const template = {
        code: 'TEXT',
        name: 't',
        configTypeId,
        status: 'ACTIVE',
        deliveryType: 'SMS',
        content: 'Ticket {{ticket}} <closed>',
      };
      expect((await app.call({ method: 'POST', url: '/api/v1/notification-templates', payload: template })).statusCode).toBe(201);
      expect(
        (await app.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } }))
          .statusCode,
      ).toBe(201);
      const user = { code: 'cleo', type: 'INDIVIDUAL', chars: {}, givenName: 'Cleo', familyName: 'Tester', phoneNumber: '+420111222333' };
      expect((await app.call({ method: 'POST', url: '/api/v1/users', payload: user })).statusCode).toBe(201);
      const id = await create(app, {
        templateCode: 'TEXT',
        notificationTo: [{ phone: '+420123456789' }, { ownerType: 'USER', ownerId: 'cleo' }],
      });
      expect(await settle(app, id, ['SENT', 'FAILED'], 10 * 60_000)).toMatchObject({ status: 'SENT', attempts: 2 });
      expect(posted.map((p) => p.body)).toEqual([
        { messageId: id, to: ['+420123456789', '+420111222333'], text: 'Ticket T-1 <closed>' },
        { messageId: id, to: ['+420123456789', '+420111222333'], text: 'Ticket T-1 <closed>' },
      ]);
      expect(posted.map((p) => p.key)).toEqual([id, id]);

      const refused = await create(app, { templateCode: 'TEXT', notificationTo: [{ phone: '+420999999999' }] });
      const failed = await settle(app, refused, ['SENT', 'FAILED'], 10 * 60_000);
      expect(failed).toMatchObject({ status: 'FAILED', attempts: 1 });
      expect(failed.lastError).toMatch(/400.*\(permanent, attempt 1\)$/);
    } finally {
      await app.close();
      await new Promise<void>((resolve) => {
        gateway.close(() => {
          resolve();
        });
      });
    }
  });
});

describe('restarts', () => {
  it('lose no pending delivery and send nothing twice that the server acknowledged', async () => {
    const app = await startApp();
    expect(
      (
        await app.call({
          method: 'POST',
          url: '/api/v1/notification-templates',
          payload: { code: 'MAIL', name: 'm', configTypeId, status: 'ACTIVE', deliveryType: 'EMAIL', subject: 's', content: 'x' },
        })
      ).statusCode,
    ).toBe(201);
    answers.set('later@example.com', [451]);
    const pending = await create(app, { templateCode: 'MAIL', notificationTo: [{ email: 'later@example.com' }] });
    const done = await create(app, { templateCode: 'MAIL', notificationTo: [{ email: 'now@example.com' }] });
    expect((await settle(app, done, ['SENT'])).status).toBe('SENT');
    expect((await settle(app, pending, ['SENDING'])).attempts).toBe(1);
    await app.close({ keepData: true });

    const again = await startApp(app.dataDir);
    try {
      expect(await settle(again, pending, ['SENT'], 10 * 60_000)).toMatchObject({ status: 'SENT', attempts: 2 });
      for (let i = 0; i < 3; i++) await again.service.scheduler.tick();
      expect(received.filter((m) => m.messageId === `<${done}@notifications.admin>`)).toHaveLength(1);
      expect(received.filter((m) => m.messageId === `<${pending}@notifications.admin>`)).toHaveLength(1);
    } finally {
      await again.close();
    }
  });
});
