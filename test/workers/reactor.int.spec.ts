// A reactor on the log processor over the real SQLite stores: every event it reacts to becomes a
// command whose key is the event's id, so a replay from scratch writes nothing twice, and every
// event it causes names its cause.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { EventStore, ReadStore } from '../../domain/ports.ts';
import { runtimeOf } from '../support/runtime.ts';
import { userGroupType } from '../../modules/registries/domain/userGroupType.ts';
import { worklogType } from '../../modules/registries/domain/worklogType.ts';
import { openSqliteEventStore } from '../../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../../infra/sqlite/readStore.ts';
import { LogProcessor } from '../../workers/processor.ts';
import { reactorActor, reactorHandler, type Reactor } from '../../workers/reactor.ts';
import { uniqueCode } from '../support/samples.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function folder(): string {
  const dir = mkdtempSync(join(tmpdir(), 'reactor-'));
  cleanups.push(() => {
    rmSync(dir, { recursive: true, force: true });
    return Promise.resolve();
  });
  return dir;
}

function readStoreIn(dir: string): ReadStore {
  const store = openSqliteReadStore({ path: join(dir, `read-${randomUUID()}.db`) });
  cleanups.push(() => store.close());
  return store;
}

/** For every user group type created, a worklog type of the same code; a code that starts with
 * `BAD` makes a command the domain refuses (a name over 255 characters). */
const mirror = (events: EventStore): Reactor => ({
  name: 'mirror-group-types',
  categories: [userGroupType.category],
  eventTypes: ['UserGroupTypeCreated'],
  async react(event, commandFor) {
    const code = String(event.data.code);
    await runtimeOf(events)
      .service(worklogType)
      .create({ code, name: code.startsWith('BAD') ? 'x'.repeat(300) : `Work of ${code}` }, commandFor());
  },
});

async function run(reactor: Reactor, events: EventStore, reads: ReadStore): Promise<LogProcessor> {
  const processor = new LogProcessor(reactorHandler(reactor, reads), events, reads);
  cleanups.push(() => processor.stop());
  await processor.start();
  return processor;
}

describe('a reactor', () => {
  it('issues one command per event, caused by it, and a replay from scratch writes nothing again', async () => {
    const dir = folder();
    const events = openSqliteEventStore(join(dir, 'events.db'));
    cleanups.push(() => events.close());
    const groups = runtimeOf(events).service(userGroupType);
    const ctx = () => ({ actor: 'alice', now: new Date(), newId: randomUUID, correlationId: 'corr-1' });
    const codes = [uniqueCode(), uniqueCode(), uniqueCode()];
    let last = 0n;
    for (const code of codes) last = (await groups.create({ code, name: code, registry: {} }, ctx())).position ?? last;

    const first = await run(mirror(events), events, readStoreIn(dir));
    expect(await first.waitFor(last, 5000)).toBe(true);
    const worklogs = runtimeOf(events).service(worklogType);
    for (const code of codes) {
      const made = await worklogs.getByCode(code);
      const [created] = await events.readStream(`${worklogType.category}-${made.id}`);
      const source = (await events.readStream(`${userGroupType.category}-${(await groups.getByCode(code)).id}`))[0];
      expect(created?.metadata).toMatchObject({
        actor: reactorActor('mirror-group-types'),
        causationId: source?.id,
        correlationId: 'corr-1',
        idempotencyKey: source?.id,
      });
    }
    await first.stop();

    // Another instance with no checkpoint at all: it reads the whole log again.
    const head = await events.headPosition();
    const replay = await run(mirror(events), events, readStoreIn(dir));
    expect(await replay.waitFor(head, 5000)).toBe(true);
    expect(await events.headPosition()).toBe(head);
  });

  it('records a command the domain refuses and goes on', async () => {
    const dir = folder();
    const events = openSqliteEventStore(join(dir, 'events.db'));
    cleanups.push(() => events.close());
    const groups = runtimeOf(events).service(userGroupType);
    const ctx = () => ({ actor: 'alice', now: new Date(), newId: randomUUID });
    const bad = `BAD${uniqueCode()}`;
    await groups.create({ code: bad, name: bad, registry: {} }, ctx());
    const good = uniqueCode();
    const last = (await groups.create({ code: good, name: good, registry: {} }, ctx())).position ?? 0n;
    const processor = await run(mirror(events), events, readStoreIn(dir));
    expect(await processor.waitFor(last, 5000)).toBe(true);
    expect(processor.status().failures).toEqual([
      expect.objectContaining({ type: 'UserGroupTypeCreated', error: 'Request does not match the schema' }),
    ]);
    expect((await runtimeOf(events).service(worklogType).getByCode(good)).code).toBe(good);
  });
});

/** Worklog types mirrored by owner (the part of the code before the first `-`); a code starting
 * with `SLOW` waits for its gate, as a trigger whose template runs to the time limit. */
function gated(events: EventStore, concurrency: number) {
  const gates = new Map<string, () => void>();
  const started: string[] = [];
  const reactor: Reactor = {
    name: `gated-${randomUUID()}`,
    categories: [userGroupType.category],
    eventTypes: ['UserGroupTypeCreated'],
    concurrency,
    shareOf: (event) => String(event.data.code).split('-')[0],
    async react(event, commandFor) {
      const code = String(event.data.code);
      started.push(code);
      if (code.startsWith('SLOW')) await new Promise<void>((resolve) => gates.set(code, resolve));
      await runtimeOf(events).service(worklogType).create({ code, name: code }, commandFor());
    },
  };
  return { reactor, gates, started };
}

async function until(check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('not reached');
}

describe('a reactor with slow events', () => {
  it("handles a newer event of another owner while one owner's slow events run, and checkpoints no further than the first not handled", async () => {
    const dir = folder();
    const events = openSqliteEventStore(join(dir, 'events.db'));
    cleanups.push(() => events.close());
    const reads = readStoreIn(dir);
    const groups = runtimeOf(events).service(userGroupType);
    const ctx = () => ({ actor: 'alice', now: new Date(), newId: randomUUID });
    const { reactor, gates, started } = gated(events, 3);
    const processor = await run(reactor, events, reads);
    const slow = ['SLOWA-1', 'SLOWA-2', 'SLOWA-3', 'SLOWA-4'].map((c) => `${c}-${uniqueCode()}`);
    const first = (await groups.create({ code: slow[0], name: 'slow', registry: {} }, ctx())).position ?? 0n;
    for (const code of slow.slice(1)) await groups.create({ code, name: 'slow', registry: {} }, ctx());
    // One owner runs on all the places but one: two of its four, whatever it sends.
    await until(() => gates.size === 2);
    const fast = `FAST-${uniqueCode()}`;
    const last = (await groups.create({ code: fast, name: 'fast', registry: {} }, ctx())).position ?? 0n;
    await until(async () => (await runtimeOf(events).service(worklogType).live(fast, true)) !== undefined);
    expect(started.filter((c) => c.startsWith('SLOW'))).toHaveLength(2);
    // The slow ones are not handled: neither the processor nor its stored checkpoint passes the first.
    expect(processor.checkpoint).toBeLessThan(first);
    expect(await reads.checkpoint(reactor.name)).toBeLessThan(first);
    expect(await processor.waitFor(last, 50)).toBe(false);
    // As each ends, the next of the owner starts, in log order.
    for (const code of slow) {
      await until(() => gates.has(code));
      gates.get(code)?.();
    }
    expect(await processor.waitFor(last, 5000)).toBe(true);
    expect(started.filter((c) => c.startsWith('SLOW'))).toEqual(slow);
    expect(await reads.checkpoint(reactor.name)).toBeGreaterThanOrEqual(last);
    for (const code of slow) expect((await runtimeOf(events).service(worklogType).getByCode(code)).code).toBe(code);
  });
});
