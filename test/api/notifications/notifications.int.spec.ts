// Notifications over HTTP: made from an ACTIVE template with subject and contents rendered (through
// a formatter template too), dated and expiring by the template, one or an array (all or none);
// moved through their state machine (409 naming the allowed moves; every move in the history with
// actor and reason); read by owner, owners, related entities and search.

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock, startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const clock = manualClock(new Date('2026-11-23T10:00:00.000Z'));
const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';

type Notification = {
  id: string;
  status: string;
  subject?: string;
  contents?: string;
  created?: string;
  expirationDate?: string;
  sent?: string;
  params?: Record<string, unknown>;
  from?: string;
  auditInfo: { version: number };
};
type ErrorBody = { code: string; message: string; errors: string[] };

const post = (url: string, payload: unknown, as: 'admin' | 'editor' | 'viewer' = 'admin', headers: Record<string, string> = {}) =>
  t.call({ method: 'POST', url, payload, as, headers });
const payload = (extra: Record<string, unknown> = {}) => ({
  ownerType: 'TICKET',
  ownerId: 'T-1',
  templateCode: 'TICKET_CLOSED',
  notificationTo: [{ email: 'ada@example.com' }, { ownerType: 'USER', ownerId: 'ada' }],
  relatedEntities: [
    { refType: 'TICKET', refId: 'T-1', name: 'Ticket 1' },
    { refType: 'SITE', refId: 'S-9' },
  ],
  data: { ticket: 'T-1', name: 'Ada <Lovelace>' },
  ...extra,
});

beforeAll(async () => {
  t = await startTestApp({ clock });
  const templates = [
    // No channel: the dispatcher leaves these PLAN (delivery has its own tests).
    {
      code: 'TICKET_CLOSED',
      subject: 'Ticket {{ticket}} closed',
      content: '<p>Dear {{name}}</p>',
      status: 'ACTIVE',
      expiration: 7,
      from: 'noc@example.com',
    },
    { code: 'NO_EXPIRY', subject: 'Kept', content: 'kept', status: 'ACTIVE' },
    { code: 'ECHO', subject: '{{title}}', content: 'echo', status: 'ACTIVE' },
    { code: 'SMS_NOTE', subject: 'Note', content: 'Hi {{name}}', status: 'ACTIVE', deliveryType: 'SMS' },
    { code: 'RETIRED', subject: 'Old', content: 'old', status: 'INACTIVE' },
  ];
  for (const tpl of templates)
    expect((await post('/api/v1/notification-templates', { name: tpl.code, configTypeId, ...tpl })).statusCode).toBe(201);
  const letter = await post('/api/v1/formatter-templates', {
    code: 'LETTER_BODY',
    inputType: 'HTML',
    content: '<h1>{{greeting}}, {{name}}</h1>',
  });
  expect(letter.statusCode, letter.body).toBe(201);
  const viaFormatter = await post('/api/v1/notification-templates', {
    code: 'VIA_LETTER',
    name: 'via letter',
    configTypeId,
    status: 'ACTIVE',
    formatterDocumentTemplateId: letter.json<{ id: string }>().id,
  });
  expect(viaFormatter.statusCode, viaFormatter.body).toBe(201);
});
afterAll(async () => {
  await t.close();
});

describe('creating notifications', () => {
  it('renders subject and contents from an ACTIVE template, starts PLAN, dated now and expiring by the template', async () => {
    const res = await post('/api/v1/notifications', payload(), 'editor');
    expect(res.statusCode, res.body).toBe(201);
    const n = res.json<Notification>();
    expect(res.headers.location).toBe(`/api/v1/notifications/${n.id}`);
    expect(n).toMatchObject({
      status: 'PLAN',
      subject: 'Ticket T-1 closed',
      contents: '<p>Dear Ada &lt;Lovelace&gt;</p>',
      from: 'noc@example.com',
      created: '2026-11-23T10:00:00.000Z',
      expirationDate: '2026-11-30T10:00:00.000Z',
      params: { templateVersion: 0, expiration: 7 },
    });
    const got = await t.call({ method: 'GET', url: `/api/v1/notifications/${n.id}`, as: 'viewer' });
    expect(got.json<Notification>().contents).toBe('<p>Dear Ada &lt;Lovelace&gt;</p>');
  });

  it('renders SMS as text, through a formatter template with the data override, and takes a subject given', async () => {
    const sms = await post('/api/v1/notifications', payload({ templateCode: 'SMS_NOTE', subject: 'Given' }));
    expect(sms.json<Notification>()).toMatchObject({ contents: 'Hi Ada <Lovelace>', subject: 'Given' });
    const letter = await post(
      '/api/v1/notifications',
      payload({ templateCode: 'VIA_LETTER', formatterDocumentTemplateDataOverride: { greeting: 'Good morning' } }),
    );
    expect(letter.json<Notification>().contents).toBe('<h1>Good morning, Ada &lt;Lovelace&gt;</h1>');
  });

  it('makes an array whole, or none of it when one cannot be made (422 for an unknown or inactive template)', async () => {
    const count = async () => (await post('/api/v1/notifications/count', { filter: [] })).json<number>();
    const before = await count();
    const many = await post('/api/v1/notifications', [payload({ ownerId: 'T-2' }), payload({ ownerId: 'T-3' })]);
    expect(many.statusCode, many.body).toBe(201);
    expect(many.json<Notification[]>().map((n) => n.status)).toEqual(['PLAN', 'PLAN']);
    const mixed = await post('/api/v1/notifications', [payload({ ownerId: 'T-4' }), payload({ templateCode: 'RETIRED' })]);
    expect(mixed.statusCode).toBe(422);
    expect(mixed.json<ErrorBody>().code).toBe('NOTIFICATION.TEMPLATE_NOT_ACTIVE');
    // What a template renders is checked before anything is written: a subject over 2,000 characters.
    const tooLong = await post('/api/v1/notifications', [
      payload({ ownerId: 'T-4', templateCode: 'ECHO', data: { title: 'ok' } }),
      payload({ ownerId: 'T-4', templateCode: 'ECHO', data: { title: 'x'.repeat(3000) } }),
    ]);
    expect([tooLong.statusCode, tooLong.json<ErrorBody>().code, tooLong.json<ErrorBody>().errors[0]]).toEqual([
      422,
      'NOTIFICATION.RENDERED_INVALID',
      '[1].subject: Too big: expected string to have <=2000 characters',
    ]);
    const unknown = await post('/api/v1/notifications', payload({ templateCode: 'NO_SUCH' }));
    expect([unknown.statusCode, unknown.json<ErrorBody>().code]).toEqual([422, 'NOTIFICATION.REFERENCE_NOT_FOUND']);
    // A template naming a formatter template that does not exist: the reference's 422, not a 404
    // (the request's own target, the notification, is no record that is missing).
    const dangling = '0b4f7a52-6c1d-4e8f-9a3b-2c5d6e7f8a9b';
    expect(
      (
        await post('/api/v1/notification-templates', {
          code: 'DANGLING',
          name: 'dangling',
          configTypeId,
          status: 'ACTIVE',
          formatterDocumentTemplateId: dangling,
        })
      ).statusCode,
    ).toBe(201);
    const gone = await post('/api/v1/notifications', payload({ templateCode: 'DANGLING' }));
    expect([gone.statusCode, gone.json<ErrorBody>().code, gone.json<ErrorBody>().errors]).toEqual([
      422,
      'NOTIFICATION.REFERENCE_NOT_FOUND',
      [`templateCode: DANGLING names formatterDocumentTemplateId ${dangling}, which does not exist`],
    ]);
    expect(await count()).toBe(before + 2);
  });

  it('honours an Idempotency-Key, refuses viewers, and checks the payload', async () => {
    const first = await post('/api/v1/notifications', payload({ ownerId: 'T-5' }), 'editor', { 'idempotency-key': 'notify-T-5' });
    const again = await post('/api/v1/notifications', payload({ ownerId: 'T-5' }), 'editor', { 'idempotency-key': 'notify-T-5' });
    expect(again.json<Notification>().id).toBe(first.json<Notification>().id);
    expect((await post('/api/v1/notifications', payload(), 'viewer')).statusCode).toBe(403);
    const bad = await post('/api/v1/notifications', payload({ notificationTo: [] }));
    expect(bad.statusCode).toBe(400);
    const tooMany = await post(
      '/api/v1/notifications',
      Array.from({ length: 101 }, () => payload()),
    );
    expect(tooMany.statusCode).toBe(413);
  });
});

describe('the state machine', () => {
  it('moves along the allowed moves, each an event with actor and reason; others are 409 naming the allowed ones', async () => {
    const { id } = (await post('/api/v1/notifications', payload({ ownerId: 'T-6' }))).json<Notification>();
    const move = (to: string, reason?: string) =>
      t.call({
        method: 'PUT',
        url: `/api/v1/notifications/${id}/state?newState=${to}${reason === undefined ? '' : `&reason=${encodeURIComponent(reason)}`}`,
        as: 'editor',
      });
    const wrong = await move('READ');
    expect(wrong.statusCode).toBe(409);
    expect(wrong.json<ErrorBody>()).toMatchObject({
      code: 'NOTIFICATION.INVALID_TRANSITION',
      errors: ['status: PLAN -> READ is not allowed; allowed: SENDING, CANCELLED, EXPIRED'],
    });
    expect((await move('SENDING', 'dispatcher picked it up')).statusCode).toBe(204);
    clock.advance(60_000);
    expect((await move('SENT')).statusCode).toBe(204);
    expect((await move('SENT')).statusCode).toBe(204);
    expect((await move('READ')).statusCode).toBe(204);
    expect((await move('ANSWERED', 'clicked yes')).statusCode).toBe(204);
    const ended = await move('EXPIRED');
    expect(ended.json<ErrorBody>().message).toContain('allowed from ANSWERED: none (it has ended)');
    expect((await move('DELIVERED')).statusCode).toBe(400);
    const n = (await t.call({ method: 'GET', url: `/api/v1/notifications/${id}` })).json<Notification>();
    expect(n).toMatchObject({ status: 'ANSWERED', sent: '2026-11-23T10:01:00.000Z', auditInfo: { version: 4 } });
    const history = (await t.call({ method: 'GET', url: `/api/v1/notifications/${id}/history` })).json<
      { type: string; actor: string; data?: Record<string, unknown> }[]
    >();
    expect(history.map((h) => h.type)).toEqual([
      'NotificationCreated',
      'NotificationStateChanged',
      'NotificationStateChanged',
      'NotificationStateChanged',
      'NotificationStateChanged',
    ]);
    expect(history.slice(1).map((h) => h.actor)).toEqual(['eddie-editor', 'eddie-editor', 'eddie-editor', 'eddie-editor']);
  });

  it('cancels a planned notification, and answers 404 for an unknown one', async () => {
    const { id } = (await post('/api/v1/notifications', payload({ ownerId: 'T-7' }))).json<Notification>();
    expect((await t.call({ method: 'PUT', url: `/api/v1/notifications/${id}/state?newState=CANCELLED` })).statusCode).toBe(204);
    expect((await t.call({ method: 'PUT', url: `/api/v1/notifications/${id}/state?newState=SENDING` })).statusCode).toBe(409);
    expect(
      (await t.call({ method: 'PUT', url: '/api/v1/notifications/6f1c2b0e-0000-4000-8000-000000000000/state?newState=SENDING' }))
        .statusCode,
    ).toBe(404);
  });
});

describe('reading notifications', () => {
  it('by owner, the owners of an owner type, related entities, and search', async () => {
    const made = await post('/api/v1/notifications', payload({ ownerType: 'CUSTOMER', ownerId: 'C-1' }));
    const { id } = made.json<Notification>();
    await post('/api/v1/notifications', payload({ ownerType: 'CUSTOMER', ownerId: 'C-2' }));
    await post('/api/v1/notifications', payload({ ownerType: 'CUSTOMER', ownerId: 'C-1' }));
    const minPosition = String(made.headers['x-event-position']);
    const byOwner = await t.call({
      method: 'GET',
      url: `/api/v1/notifications/by-owner?ownerType=CUSTOMER&ownerId=C-1&minPosition=${minPosition}`,
      as: 'viewer',
    });
    expect(byOwner.json<Notification[]>()).toHaveLength(2);
    const owners = await t.call({ method: 'GET', url: '/api/v1/notifications/owners?ownerType=CUSTOMER', as: 'viewer' });
    expect(owners.json<string[]>().sort()).toEqual(['C-1', 'C-2']);
    const related = await t.call({ method: 'GET', url: `/api/v1/notifications/${id}/related-entities?refType=SITE`, as: 'viewer' });
    expect(related.json()).toEqual([{ refType: 'SITE', refId: 'S-9' }]);
    const search = await post(
      '/api/v1/notifications/search',
      {
        filter: [
          { column: 'ownerType', operator: 'EQ', value: 'CUSTOMER' },
          { column: 'status', operator: 'EQ', value: 'PLAN' },
        ],
      },
      'viewer',
    );
    expect(search.json<Notification[]>()).toHaveLength(3);
    expect((await t.call({ method: 'GET', url: '/api/v1/notifications/not-a-uuid/related-entities?refType=SITE' })).statusCode).toBe(400);
  });
});

describe('expiry', () => {
  const statusOf = async (app: TestApp, id: string) =>
    (await app.call({ method: 'GET', url: `/api/v1/notifications/${id}` })).json<Notification>().status;
  /** Ticks until the read model has folded what the scheduler looks at (bounded). */
  const tickUntil = async (app: TestApp, id: string, status: string) => {
    for (let i = 0; i < 50 && (await statusOf(app, id)) !== status; i++) {
      await app.service.scheduler.tick();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return statusOf(app, id);
  };

  it('makes PLAN and SENT notifications EXPIRED once their expirationDate passes, by the service, and no others', async () => {
    const make = async (ownerId: string, templateCode = 'TICKET_CLOSED') =>
      (await post('/api/v1/notifications', payload({ ownerId, templateCode }))).json<Notification>().id;
    const planned = await make('E-1');
    const sent = await make('E-2');
    const sending = await make('E-3');
    const never = await make('E-4', 'NO_EXPIRY');
    for (const [id, moves] of [
      [sent, ['SENDING', 'SENT']],
      [sending, ['SENDING']],
    ] as const) {
      for (const to of moves)
        expect((await t.call({ method: 'PUT', url: `/api/v1/notifications/${id}/state?newState=${to}` })).statusCode).toBe(204);
    }
    await t.service.scheduler.tick();
    expect(await statusOf(t, planned)).toBe('PLAN');
    clock.advance(8 * 86_400_000);
    expect(await tickUntil(t, planned, 'EXPIRED')).toBe('EXPIRED');
    expect(await tickUntil(t, sent, 'EXPIRED')).toBe('EXPIRED');
    expect(await statusOf(t, sending)).toBe('SENDING');
    expect(await statusOf(t, never)).toBe('PLAN');
    const history = (await t.call({ method: 'GET', url: `/api/v1/notifications/${planned}/history` })).json<{ actor: string }[]>();
    expect(history.at(-1)?.actor).toBe('system:notification-expiry');
  });

  it('expires after a restart too: due work is read from stored data', async () => {
    const app = await startTestApp({ clock });
    const { id } = (
      await app.call({
        method: 'POST',
        url: '/api/v1/notification-templates',
        payload: { code: 'SHORT', name: 'short', configTypeId, status: 'ACTIVE', content: 'x', expiration: 1 },
      })
    ).json<{ id: string }>();
    expect(id).toBeTypeOf('string');
    const made = (
      await app.call({ method: 'POST', url: '/api/v1/notifications', payload: payload({ templateCode: 'SHORT' }) })
    ).json<Notification>();
    await app.close({ keepData: true });
    clock.advance(2 * 86_400_000);
    const again = await startTestApp({ clock, dataDir: app.dataDir });
    try {
      expect(await tickUntil(again, made.id, 'EXPIRED')).toBe('EXPIRED');
    } finally {
      await again.close();
    }
  });
});

describe('attachments', () => {
  const pdf = Buffer.from('%PDF-1.4\n% a tiny test document\n%%EOF\n');
  it('are stored in the blob store, the notification keeping their name, type, size and hash, never their bytes', async () => {
    const res = await post(
      '/api/v1/notifications',
      payload({ ownerId: 'A-1', attachments: [{ name: 'invoice.pdf', mimeType: 'application/pdf', data: pdf.toString('base64') }] }),
    );
    expect(res.statusCode, res.body).toBe(201);
    const n = res.json<Notification & { attachments: unknown[] }>();
    expect(n.attachments).toEqual([
      { name: 'invoice.pdf', mimeType: 'application/pdf', size: pdf.length, sha256: createHash('sha256').update(pdf).digest('hex') },
    ]);
    const history = await t.call({ method: 'GET', url: `/api/v1/notifications/${n.id}/history` });
    expect(history.body).not.toContain(pdf.toString('base64'));
  });

  it('are refused when their bytes are not their type (422), too many or too large (413)', async () => {
    const one = (a: Record<string, unknown>) => post('/api/v1/notifications', payload({ ownerId: 'A-2', attachments: [a] }));
    const lying = await one({ name: 'x.png', mimeType: 'image/png', data: pdf.toString('base64') });
    expect([lying.statusCode, lying.json<ErrorBody>().errors]).toEqual([422, ['attachments[0].data: its bytes are not image/png']]);
    expect((await one({ name: 'x.exe', mimeType: 'application/x-msdownload', data: 'TVqQ' })).statusCode).toBe(422);
    expect((await one({ name: 'x.pdf', mimeType: 'application/pdf', data: 'not base64!' })).statusCode).toBe(422);
    const text = await one({
      name: 'notes.txt',
      mimeType: 'text/plain; charset=utf-8',
      data: Buffer.from('plain words').toString('base64'),
    });
    expect(text.statusCode, text.body).toBe(201);
    const many = await post(
      '/api/v1/notifications',
      payload({
        attachments: Array.from({ length: 11 }, () => ({ name: 'a.pdf', mimeType: 'application/pdf', data: pdf.toString('base64') })),
      }),
    );
    expect([many.statusCode, many.json<ErrorBody>().code]).toEqual([413, 'NOTIFICATION.TOO_MANY_ATTACHMENTS']);
    const big = Buffer.concat([pdf, Buffer.alloc(4 * 1024 * 1024)]);
    const large = await one({ name: 'big.pdf', mimeType: 'application/pdf', data: big.toString('base64') });
    expect([large.statusCode, large.json<ErrorBody>().code]).toEqual([413, 'NOTIFICATION.ATTACHMENT_TOO_LARGE']);
  });
});
