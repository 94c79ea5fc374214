// Two instances delivering the same notifications (multi-instance): an attempt under way holds its
// notification, so a second dispatcher that got the scheduler's lease meanwhile (a slow SMTP server
// outlasting the lease) sends nothing; attempt n is made once, a second command for it is refused
// with a conflict; and the scheduler renews its lease while a long tick runs, so the other instance
// does not get it.

import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ATTEMPT_HOLD_MS, notification } from '../../../modules/notifications/domain/notification.ts';
import type { Document } from '../../../domain/ports.ts';
import { runtimeOver } from '../../support/runtime.ts';
import { isDomainError } from '../../../domain/shared/errors.ts';
import { openEmbeddedStores } from '../../../infra/embedded.ts';
import { SmtpMailSender } from '../../../infra/mail/smtpSender.ts';
import { dispatchSchedule } from '../../../modules/notifications/workers/dispatcher.ts';
import { Scheduler, type Schedule } from '../../../workers/scheduler.ts';
import { manualClock, startTestApp, type TestApp } from '../../support/testApp.ts';

const clock = manualClock(new Date('2026-11-23T10:00:00.000Z'));
const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
const dir = mkdtempSync(join(tmpdir(), 'dispatch-instances-'));
const stores = openEmbeddedStores(dir);
const delivered: string[] = [];
/** Resolves the DATA of the held message: the test lets it through. */
let release: (() => void) | undefined;
let dataStarted: (() => void) | undefined;
let smtp: SMTPServer;
let mail: SmtpMailSender;
let t: TestApp;

beforeAll(async () => {
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    onData(stream, session, callback) {
      stream.resume();
      stream.on('end', () => {
        const finish = () => {
          delivered.push(session.envelope.rcptTo.map((r) => r.address).join(','));
          callback();
        };
        if (session.envelope.rcptTo.some((r) => r.address === 'slow@example.com')) {
          release = finish;
          dataStarted?.();
        } else finish();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  mail = new SmtpMailSender({ url: `smtp://127.0.0.1:${String((smtp.server.address() as AddressInfo).port)}`, timeoutMs: 10_000 });
  t = await startTestApp({ clock, dataDir: dir, stores, mail, extra: { manualScheduler: true } });
  const res = await t.call({
    method: 'POST',
    url: '/api/v1/notification-templates',
    payload: { code: 'MAIL', name: 'm', configTypeId, status: 'ACTIVE', deliveryType: 'EMAIL', subject: 's', content: 'x' },
  });
  expect(res.statusCode, res.body).toBe(201);
});
afterAll(async () => {
  await t.close();
  await new Promise<void>((resolve) => {
    smtp.close(resolve);
  });
  rmSync(dir, { recursive: true, force: true });
});

/** The other instance's dispatcher: the same stores and read models, its own schedule. */
const otherInstance = (): Schedule =>
  dispatchSchedule({
    ...stores,
    runtime: runtimeOver(stores.eventStore),
    readModels: t.service.readModels,
    clock,
    newId: randomUUID,
    mail,
  });

const readModelDoc = async (id: string): Promise<Document> => {
  for (let i = 0; i < 100; i++) {
    const res = await t.call({ method: 'GET', url: `/api/v1/notifications/${id}` });
    if (res.statusCode === 200) return res.json<Document>();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`notification ${id} never readable`);
};
async function until(id: string, test: (d: Document) => boolean): Promise<Document> {
  for (let i = 0; i < 200; i++) {
    const d = await readModelDoc(id);
    if (test(d)) return d;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`notification ${id} never got there`);
}

describe('two dispatchers', () => {
  it('send an e-mail once while its attempt is under way, whichever instance is offered it', async () => {
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/notifications',
      payload: { templateCode: 'MAIL', ownerType: 'TICKET', ownerId: 'T-1', notificationTo: [{ email: 'slow@example.com' }] },
    });
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json<{ id: string }>().id;
    await until(id, (d) => d.status === 'PLAN');
    await t.service.scheduler.tick();
    // SENDING and due: what both instances read before either attempts.
    const seen = await until(id, (d) => d.status === 'SENDING');
    const started = new Promise<void>((resolve) => {
      dataStarted = resolve;
    });
    const first = t.service.scheduler.tick();
    await started;
    // The first instance is mid-send. The other, offered the notification as it read it before
    // (its read model stale, or the lease passed to it), sends nothing, even a minute later.
    const other = otherInstance();
    expect(await other.run(seen, clock.now())).toBe(true);
    expect(await other.run(seen, new Date(clock.now().getTime() + 60_000))).toBe(true);
    (release as () => void)();
    await first;
    const sent = await until(id, (d) => d.status === 'SENT');
    expect(sent.attempts).toBe(1);
    expect(delivered.filter((d) => d === 'slow@example.com')).toHaveLength(1);
  });

  it('are held off by an attempt only until its hold passes: a crash mid-send is attempted again', async () => {
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/notifications',
      payload: { templateCode: 'MAIL', ownerType: 'TICKET', ownerId: 'T-2', notificationTo: [{ email: 'after-crash@example.com' }] },
    });
    const id = res.json<{ id: string }>().id;
    await until(id, (d) => d.status === 'PLAN');
    await t.service.scheduler.tick();
    await until(id, (d) => d.status === 'SENDING');
    // A dispatcher recorded attempt 1 and died before its outcome.
    const service = runtimeOver(stores.eventStore).service(notification);
    const ctx = () => ({ actor: 'test', now: clock.now(), newId: randomUUID, requestId: randomUUID() });
    await service.execute(id, { type: 'Attempt', attempt: 1 }, ctx());
    // Attempt 1 again (a retried command, a second dispatcher): refused.
    const again = await service.execute(id, { type: 'Attempt', attempt: 1 }, ctx()).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isDomainError(again) && again.code).toBe('NOTIFICATION.ATTEMPT_TAKEN');
    const held = await until(id, (d) => d.attempts === 1);
    expect(held.nextAttemptAt).toBe(new Date(clock.now().getTime() + ATTEMPT_HOLD_MS).toISOString());
    expect(await t.service.scheduler.tick()).toBe(0);
    clock.advance(ATTEMPT_HOLD_MS + 1);
    await t.service.scheduler.tick();
    expect(await until(id, (d) => d.status === 'SENT')).toMatchObject({ attempts: 2 });
    expect(delivered.filter((d) => d === 'after-crash@example.com')).toHaveLength(1);
  });
});

describe("the scheduler's lease", () => {
  it('is renewed while a tick outlasts it, and a tick that lost it takes no further item', async () => {
    // On a fake clock (the timers, and Date, which the lease's expiry reads): the 100 ms lease, its
    // renewals every 33 ms and the 150 ms items come in the order the clock says, however loaded
    // the machine (on the real clock a stalled event loop let the lease lapse).
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const own = openEmbeddedStores(mkdtempSync(join(tmpdir(), 'lease-')));
    try {
      const ran: string[] = [];
      const slow = (name: string, ids = ['a', 'b', 'c']): Schedule => ({
        name,
        due: () => Promise.resolve(ids.map((id): Document => ({ id, auditInfo: { version: 0 } }))),
        run: async (item) => {
          await new Promise((resolve) => setTimeout(resolve, 150));
          ran.push(`${name}:${item.id}`);
          return true;
        },
      });
      const wallClock = { now: () => new Date() };
      const one = new Scheduler([slow('one')], own.readStore, { clock: wallClock, instanceId: 'one', leaseMs: 100 });
      const two = new Scheduler([slow('two')], own.readStore, { clock: wallClock, instanceId: 'two', leaseMs: 100 });
      const ticking = one.tick();
      // Past the lease of 100 ms while the first tick runs (450 ms): still the first instance's.
      await vi.advanceTimersByTimeAsync(250);
      expect(await two.tick()).toBe(0);
      await vi.advanceTimersByTimeAsync(200);
      expect(await ticking).toBe(3);
      expect(ran).toEqual(['one:a', 'one:b', 'one:c']);

      // The lease taken away mid-tick (a paused process whose lease expired): no item after the
      // one under way. Items it has not run yet (a scheduler runs an item once per version).
      ran.length = 0;
      await vi.advanceTimersByTimeAsync(150);
      const three = new Scheduler([slow('three', ['d', 'e', 'f'])], own.readStore, { clock: wallClock, instanceId: 'three', leaseMs: 100 });
      const lost = three.tick();
      await vi.advanceTimersByTimeAsync(50);
      await own.readStore.releaseLease('scheduler', 'three');
      expect(await own.readStore.tryLease('scheduler', 'thief', 60_000)).toBe(true);
      await vi.advanceTimersByTimeAsync(100);
      expect(await lost).toBe(1);
      expect(ran).toEqual(['three:d']);
      await one.stop();
      await two.stop();
      await three.stop();
    } finally {
      vi.useRealTimers();
      await own.readStore.close();
      await own.eventStore.close();
    }
  });
});
