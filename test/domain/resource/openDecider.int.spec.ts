// A bespoke resource on the open decider, over the real embedded log: own commands and events,
// hidden state kept out of reads and history, and an upcaster reading an event written in an older
// shape (appended to the log as the older code wrote it).

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { command, created, defineResource, deleted, ownEvent, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { runtimeOver } from '../../support/runtime.ts';
import type { CommandContext } from '../../../domain/shared/commandHandler.ts';
import { openSqliteEventStore } from '../../../infra/sqlite/eventStore.ts';

const widget = defineResource({
  name: 'Widget',
  path: 'widgets',
  fields: z.strictObject({ name: z.string(), colour: z.string().optional() }),
  hidden: ['secret'],
  events: {
    // Version 1 called the name `label`.
    WidgetCreated: created({ schemaVersion: 2, upcasters: { 1: ({ label, ...rest }) => ({ ...rest, name: label }) } }),
    WidgetReplaced: replaced(),
    WidgetPatched: patched(),
    WidgetDeleted: deleted(),
    WidgetSecretSet: ownEvent({
      meaning: 'a secret was set',
      data: z.strictObject({ secret: z.string() }),
      evolve: (r, d) => ({ ...r, hidden: { ...r.hidden, secret: d.secret } }),
    }),
    WidgetPainted: ownEvent({
      meaning: 'painted',
      data: z.strictObject({ colour: z.string() }),
      evolve: (r, d) => ({ ...r, fields: { ...r.fields, colour: d.colour } }),
    }),
  },
  commands: {
    SetSecret: command('set the secret', z.strictObject({ secret: z.string() })),
    Paint: command('paint it', z.strictObject({ colour: z.string() })),
  },
  behaviour: {
    decide(command, record) {
      switch (command.type) {
        case 'SetSecret':
          return [{ type: 'WidgetSecretSet', data: { secret: command.secret } }];
        case 'Paint':
          return record.fields.colour === command.colour ? [] : [{ type: 'WidgetPainted', data: { colour: command.colour } }];
      }
    },
  },
});

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const ctx = (): CommandContext => ({ actor: 'tester', now: new Date('2026-11-23T10:00:00Z'), newId: randomUUID });

describe('open decider', () => {
  it('reads an event of an older schema version through its upcaster', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'open-decider-'));
    dirs.push(dir);
    const store = openSqliteEventStore(join(dir, 'events.db'));
    const id = randomUUID();
    await store.append({
      stream: `widget-${id}`,
      expected: 'no_stream',
      events: [
        {
          id: randomUUID(),
          type: 'WidgetCreated',
          schemaVersion: 1,
          data: { id, label: 'Old one' },
          metadata: { actor: 'old-code', at: '2025-01-01T00:00:00.000Z' },
        },
      ],
    });
    const service = runtimeOver(store, [widget]).service(widget);
    expect(await service.get(id)).toMatchObject({ id, name: 'Old one' });
    const history = await service.history(id, { page: 0, size: 10 });
    const entries = [];
    for await (const e of history.entries) entries.push(e);
    expect(entries[0]?.data).toEqual({ id, name: 'Old one' });
    // New events of the type are written at the current version.
    const created = await service.create({ name: 'New' }, ctx());
    const events = await store.readStream(`widget-${String(created.record?.id)}`);
    expect(events[0]).toMatchObject({ schemaVersion: 2, data: { name: 'New' } });
    await store.close();
  });

  it('runs own commands, keeps hidden state out of records and history, and writes nothing for a no-op', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'open-decider-'));
    dirs.push(dir);
    const store = openSqliteEventStore(join(dir, 'events.db'));
    const service = runtimeOver(store, [widget]).service(widget);
    const { record } = await service.create({ name: 'W' }, ctx());
    const id = String(record?.id);
    const secret = await service.execute(id, { type: 'SetSecret', secret: 's3cr3t-value' }, ctx());
    expect(secret.record).toEqual(expect.not.objectContaining({ secret: expect.anything() as unknown }));
    expect(JSON.stringify(await service.get(id))).not.toContain('s3cr3t');
    const painted = await service.execute(id, { type: 'Paint', colour: 'red' }, ctx());
    expect(painted.record).toMatchObject({ colour: 'red', auditInfo: { version: 2 } });
    const again = await service.execute(id, { type: 'Paint', colour: 'red' }, ctx());
    expect(again.version).toBe(2);
    // A replace keeps the hidden part (it is not the client's to send or to lose).
    await service.replace(id, { name: 'W2' }, ctx());
    const history = await service.history(id, { page: 0, size: 10 });
    const shown = [];
    for await (const e of history.entries) shown.push(e);
    expect(shown.map((e) => e.type)).toEqual(['WidgetCreated', 'WidgetSecretSet', 'WidgetPainted', 'WidgetReplaced']);
    expect(JSON.stringify(shown)).not.toContain('s3cr3t');
    await store.close();
  });

  it('compares a unique key in its normal form: another spelling of the same value is taken, and found', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'open-decider-'));
    dirs.push(dir);
    const store = openSqliteEventStore(join(dir, 'events.db'));
    const dnKey = {
      name: 'ldapMemberOf',
      fields: ['dn'],
      normalize: (dn: string) =>
        dn
          .toLowerCase()
          .replace(/\s*([,=])\s*/g, '$1')
          .trim(),
    };
    const group = defineResource({
      name: 'Group',
      path: 'groups',
      fields: z.strictObject({ dn: z.string().optional() }),
      unique: [dnKey],
      events: { GroupCreated: created(), GroupReplaced: replaced(), GroupPatched: patched(), GroupDeleted: deleted() },
    });
    const service = runtimeOver(store, [group]).service(group);
    const first = await service.create({ dn: 'CN=Ops, OU=Groups' }, ctx());
    await expect(service.create({ dn: 'cn = ops,ou=groups' }, ctx())).rejects.toMatchObject({
      status: 'CONFLICT',
      code: 'GROUP.LDAP_MEMBER_OF_TAKEN',
    });
    expect((await service.getByKey(dnKey, { dn: 'cn=OPS , ou=GROUPS' })).id).toBe(first.record?.id);
    // Without the field, no value of the key is held.
    await service.create({}, ctx());
    await service.create({}, ctx());
    await store.close();
  });
});
