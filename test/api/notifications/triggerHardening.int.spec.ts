// Regressions from the review of triggers: Kafka messages that used to stall a partition or be
// taken for another, a relative evalNotificationUrl leaving its microservice, SYSTEM triggers
// copying whole records, and a template made ACTIVE just before a trigger unseen by it.

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IncomingMessage } from '../../../domain/ports.ts';
import { openEmbeddedStores } from '../../../infra/embedded.ts';
import { triggerMessageHandler } from '../../../modules/notifications/workers/topics.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';
import { runtimeOf } from '../../support/runtime.ts';

const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
let t: TestApp;
let stores: ReturnType<typeof openEmbeddedStores>;

beforeAll(async () => {
  stores = openEmbeddedStores(mkdtempSync(join(tmpdir(), 'trigger-hardening-')));
  t = await startTestApp({
    stores,
    extra: { settings: { notifications: { microserviceUrls: { tickets: 'http://tickets.internal:8080/api/' } } } },
  });
  for (const rule of [
    { code: 'K1', eventType: 'KAFKA' },
    { code: 'K2', eventType: 'KAFKA' },
  ]) {
    expect((await t.call({ method: 'POST', url: '/api/v1/notification-rules', payload: { name: rule.code, ...rule } })).statusCode).toBe(
      201,
    );
  }
});
afterAll(async () => {
  await t.close();
});

type Trigger = {
  id: string;
  status: string;
  reason?: string;
  ruleCode: string;
  data?: Record<string, unknown>;
  notificationIds?: string[];
};

async function settled(id: string): Promise<Trigger> {
  for (let i = 0; i < 200; i++) {
    const res = await t.call({ method: 'GET', url: `/api/v1/notification-triggers/${id}` });
    if (res.statusCode === 200 && res.json<Trigger>().status !== 'RECEIVED') return res.json<Trigger>();
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`trigger ${id} not processed`);
}

describe('Kafka trigger messages', () => {
  const handler = () => triggerMessageHandler({ runtime: runtimeOf(stores.eventStore), now: () => new Date(), newId: randomUUID });
  let offset = 0;
  const message = (value: string | Buffer, headers: Record<string, string> = {}, key: string | null = 'k'): IncomingMessage => ({
    topic: 'triggers',
    partition: 0,
    offset: String(offset++),
    key,
    headers,
    value: typeof value === 'string' ? Buffer.from(value) : value,
  });
  const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

  it('nested past 32 levels, not UTF-8, or with a bad ruleCode header are dead letters, never a throw', async () => {
    const h = handler();
    expect(await h(message(`{"ownerType":"T","ownerId":"1","ruleCode":"K1","data":{"x":${nested(100_000)}}}`))).toEqual({
      kind: 'dead',
      reason: 'value nests deeper than 32 levels',
    });
    expect(await h(message(`{"ownerType":"T","ownerId":"1","ruleCode":"K1","data":{"x":${nested(40)}}}`))).toEqual({
      kind: 'dead',
      reason: 'value nests deeper than 32 levels',
    });
    expect(await h(message(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])))).toEqual({ kind: 'dead', reason: 'value is not UTF-8' });
    expect(await h(message('{"ownerType":"T","ownerId":"1"}', { ruleCode: 'x'.repeat(300) }))).toMatchObject({ kind: 'dead' });
    expect(await h(message('{"ownerType":"T","ownerId":"1","ruleCode":"K1","data":{"n":12345678901234567890}}'))).toMatchObject({
      kind: 'dead',
    });
  });

  it('the same key and value naming two rules by header are two triggers; the same message again is one', async () => {
    const h = handler();
    const value = '{"ownerType":"T","ownerId":"same"}';
    for (const rule of ['K1', 'K2', 'K1']) expect(await h(message(value, { ruleCode: rule }, 'same-key'))).toEqual({ kind: 'handled' });
    const found = (
      await t.call({
        method: 'POST',
        url: '/api/v1/notification-triggers/search?minPosition=0',
        payload: { filter: [{ column: 'ownerId', operator: 'EQ', value: 'same' }] },
      })
    ).json<Trigger[]>();
    expect(found.map((x) => x.ruleCode).sort()).toEqual(['K1', 'K2']);
  });
});

describe('evalNotificationUrl relative to a microservice', () => {
  it('may not leave its base: another scheme and host after the slash, or dot segments, fail the trigger', async () => {
    for (const [code, url] of [
      ['ESCAPE_HOST', '/http://127.0.0.1:9/steal'],
      ['ESCAPE_DOTS', '/../../admin/secrets'],
      ['ESCAPE_ENCODED', '/%2e%2e/admin'],
    ] as const) {
      expect(
        (
          await t.call({
            method: 'POST',
            url: '/api/v1/notification-rules',
            payload: { code, name: code, eventType: 'REST', microserviceCode: 'tickets', evalNotificationUrl: url },
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
        subject: 's',
      };
      expect((await t.call({ method: 'POST', url: '/api/v1/notification-templates', payload: template })).statusCode).toBe(201);
      const res = await t.call({
        method: 'POST',
        url: `/api/v1/notification-rules/${code}/trigger`,
        payload: { ownerType: 'T', ownerId: '1' },
      });
      expect(await settled(res.json<{ triggerId: string }>().triggerId)).toMatchObject({
        status: 'FAILED',
        reason: `evalNotificationUrl ${url} leaves the base of microservice tickets`,
      });
    }
  });
});

describe('SYSTEM triggers and fresh templates', () => {
  it('name the record instead of copying it, render it all the same; a template made ACTIVE just before a trigger is used', async () => {
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/notification-rules',
          payload: { code: 'ON_TYPE', name: 'x', eventType: 'SYSTEM', config: { eventTypes: ['UserTypeCreated'] } },
        })
      ).statusCode,
    ).toBe(201);
    const template = {
      code: 'ON_TYPE_T',
      name: 'x',
      configTypeId,
      status: 'ACTIVE',
      notificationRuleCode: 'ON_TYPE',
      deliveryType: 'APPLICATION',
      subject: 'New type {{record.code}}',
    };
    // Made and at once followed by the event: the trigger reactor waits for the templates' read model.
    expect((await t.call({ method: 'POST', url: '/api/v1/notification-templates', payload: template })).statusCode).toBe(201);
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'TECH', name: 'Technician', type: 'INDIVIDUAL' } }))
        .statusCode,
    ).toBe(201);
    let trigger: Trigger | undefined;
    for (let i = 0; i < 200 && trigger === undefined; i++) {
      const found = (
        await t.call({
          method: 'POST',
          url: '/api/v1/notification-triggers/search',
          payload: { filter: [{ column: 'ruleCode', operator: 'EQ', value: 'ON_TYPE' }] },
        })
      ).json<Trigger[]>();
      if (found[0] !== undefined && found[0].status !== 'RECEIVED') trigger = found[0];
      else await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(trigger?.status).toBe('PROCESSED');
    expect(Object.keys(trigger?.data ?? {}).sort()).toEqual(['eventId', 'eventType', 'recordId', 'stream', 'version']);
    const [made] = (await t.call({ method: 'POST', url: '/api/v1/notifications/by-ids', payload: trigger?.notificationIds ?? [] })).json<
      { subject: string; data: Record<string, unknown> }[]
    >();
    expect(made?.subject).toBe('New type TECH');
    expect(made?.data.record).toBeUndefined();
  });
});
