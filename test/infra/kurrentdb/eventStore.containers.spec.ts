// The EventStore contract on KurrentDB: against EVENTSTORE_URL when it is set, else in a container
// started through testcontainers, else skipped with the reason in the title. Plus what only a real
// server shows: claims left behind by a crash are taken over, other instances' appends are heard.

import { randomUUID } from 'node:crypto';
import { KurrentDBClient, NO_STREAM, jsonEvent } from '@kurrent/kurrentdb-client';
import { KurrentDbContainer, type StartedKurrentDbContainer } from '@testcontainers/kurrentdb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CodeTakenError, type NewEvent } from '../../../domain/ports.ts';
import { CLAIM_GRACE_MS, CODE_CLAIMED, codeStreamName } from '../../../infra/kurrentdb/codeClaims.ts';
import { openKurrentEventStore, type KurrentEventStore, type KurrentEventStoreOptions } from '../../../infra/kurrentdb/eventStore.ts';
import { toStoredMetadata } from '../../../infra/kurrentdb/metadata.ts';
import { IMAGES, planTarget } from '../../support/containers.ts';
import { eventStoreContract } from '../../support/eventStoreContract.ts';

const plan = planTarget('EVENTSTORE_URL');

if (plan.kind === 'skip') {
  describe.skip(`EventStore contract: KurrentDB (skipped: ${plan.reason})`, () => {
    it('runs where KurrentDB or a container engine is available', () => undefined);
  });
} else {
  let container: StartedKurrentDbContainer | undefined;
  let url = plan.kind === 'url' ? plan.url : undefined;
  const opened: Promise<KurrentEventStore>[] = [];

  beforeAll(async () => {
    if (plan.kind !== 'container') return;
    container = await new KurrentDbContainer(IMAGES.kurrentdb).start();
    url = container.getConnectionString();
  }, 240_000);

  afterAll(async () => {
    for (const s of await Promise.allSettled(opened)) if (s.status === 'fulfilled') await s.value.close();
    await container?.stop();
  }, 60_000);

  const openStore = (options: KurrentEventStoreOptions = {}): Promise<KurrentEventStore> => {
    if (url === undefined) throw new Error('KurrentDB did not start');
    const store = openKurrentEventStore(url, options);
    opened.push(store);
    return store;
  };
  let shared: Promise<KurrentEventStore> | undefined;
  eventStoreContract('KurrentDB', () => (shared ??= openStore()));

  const anEvent = (metadata: Partial<NewEvent['metadata']> = {}): NewEvent => ({
    id: randomUUID(),
    type: 'ThingHappened',
    schemaVersion: 1,
    data: {},
    metadata: { actor: 'tester', at: new Date().toISOString(), ...metadata },
  });
  const freshScope = () => `t${randomUUID().replaceAll('-', '').slice(0, 12)}`;

  describe('KurrentDB adapter on a real server', () => {
    it('takes over a claim whose holder never wrote its event, once the grace period is over', async () => {
      if (url === undefined) throw new Error('KurrentDB did not start');
      const scope = freshScope();
      const client = KurrentDBClient.connectionString(url);
      try {
        // A claimant that crashed between its claim and its append. Its own clock (`at`, an hour
        // behind) is not what counts: the server's time of the claim is.
        const claim = { stream: `${scope}-${randomUUID()}`, eventId: randomUUID(), at: new Date(Date.now() - 3_600_000).toISOString() };
        await client.appendToStream(codeStreamName({ scope, code: 'C' }), jsonEvent({ type: CODE_CLAIMED, data: claim }), {
          streamState: NO_STREAM,
        });
      } finally {
        await client.dispose();
      }
      const patient = await openStore();
      const stream = `${scope}-${randomUUID()}`;
      const request = { stream, expected: 'no_stream' as const, events: [anEvent()], claim: [{ scope, code: 'C' }] };
      await expect(patient.append(request)).rejects.toBeInstanceOf(CodeTakenError);
      expect(await patient.findCode({ scope, code: 'C' })).toBeUndefined();
      // An instance whose clock is past the grace period (rather than a test that waits for it).
      const impatient = await openStore({ now: () => Date.now() + CLAIM_GRACE_MS + 5_000 });
      await impatient.append(request);
      expect(await impatient.findCode({ scope, code: 'C' })).toBe(stream);
      expect(await patient.findCode({ scope, code: 'C' })).toBe(stream);
    });

    it('takes over a code its holder released in its own stream when the CodeReleased append was lost', async () => {
      if (url === undefined) throw new Error('KurrentDB did not start');
      const store = await openStore();
      const scope = freshScope();
      const holder = `${scope}-${randomUUID()}`;
      await store.append({ stream: holder, expected: 'no_stream', events: [anEvent()], claim: [{ scope, code: 'R' }] });
      const client = KurrentDBClient.connectionString(url);
      try {
        // The holder's release, as the adapter writes it, without the reservation stream's CodeReleased.
        const release = anEvent();
        const metadata = toStoredMetadata(release, { claimed: [], released: [codeStreamName({ scope, code: 'R' })] });
        await client.appendToStream(holder, jsonEvent({ id: release.id, type: release.type, data: release.data, metadata }), {
          streamState: 0n,
        });
      } finally {
        await client.dispose();
      }
      expect(await store.findCode({ scope, code: 'R' })).toBeUndefined();
      const next = `${scope}-${randomUUID()}`;
      await store.append({ stream: next, expected: 'no_stream', events: [anEvent()], claim: [{ scope, code: 'R' }] });
      expect(await store.findCode({ scope, code: 'R' })).toBe(next);
    });

    it('hears appends of another instance through its $all subscription', async () => {
      const listening = await openStore();
      const writing = await openStore();
      const heard: bigint[] = [];
      const off = listening.onAppended((p) => heard.push(p));
      try {
        // The subscription starts at the end of $all: give it a moment to be confirmed.
        await new Promise((r) => setTimeout(r, 500));
        const r = await writing.append({ stream: `${freshScope()}-${randomUUID()}`, expected: 'no_stream', events: [anEvent()] });
        await expect.poll(() => heard.some((p) => p >= r.position), { timeout: 10_000 }).toBe(true);
      } finally {
        off();
      }
    });

    it('reads the same positions from a stream and from $all, and a keyed retry of another instance is a duplicate', async () => {
      const a = await openStore();
      const b = await openStore();
      const scope = freshScope();
      const stream = `${scope}-${randomUUID()}`;
      const events = [anEvent({ idempotencyKey: 'k' }), anEvent({ idempotencyKey: 'k' })];
      const first = await a.append({ stream, expected: 'no_stream', events });
      expect(await b.append({ stream, expected: 'no_stream', events })).toEqual({ ...first, duplicate: true });
      const fromStream = (await b.readStream(stream)).map((e) => e.position);
      const fromAll = (await b.readAll({ after: 0n, limit: 10, categories: [scope] })).map((e) => e.position);
      expect(fromStream).toEqual(fromAll);
      expect(fromStream.at(-1)).toBe(first.position);
      expect(b.distance(fromStream[0] ?? 0n, first.position)).toBeGreaterThan(0);
    });
  });
}
