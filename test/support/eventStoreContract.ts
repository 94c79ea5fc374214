// The EventStore port's contract, written once and run against every adapter (SQLite here;
// KurrentDB through testcontainers where a Docker engine exists).

import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CodeTakenError, WrongExpectedRevisionError, type EventStore, type NewEvent } from '../../domain/ports.ts';

const anEvent = (type = 'ThingHappened', data: Record<string, unknown> = {}): NewEvent => ({
  id: randomUUID(),
  type,
  schemaVersion: 1,
  data,
  metadata: { actor: 'tester', at: new Date().toISOString(), requestId: 'r1', correlationId: 'c1' },
});

/** A fresh category per test: tests never see each other's events and need no truncation. */
const freshCategory = () => `t${randomUUID().replaceAll('-', '').slice(0, 12)}`;

export function eventStoreContract(name: string, open: () => Promise<EventStore> | EventStore): void {
  describe(`EventStore contract: ${name}`, () => {
    it('appends to a new stream with no_stream and reads it back in order with revisions', async () => {
      const store = await open();
      const stream = `${freshCategory()}-${randomUUID()}`;
      const events = [anEvent('A', { n: 1 }), anEvent('B', { n: 2 })];
      const result = await store.append({ stream, expected: 'no_stream', events });
      expect(result.revision).toBe(1);
      const read = await store.readStream(stream);
      expect(read.map((e) => [e.type, e.revision, e.data, e.id])).toEqual([
        ['A', 0, { n: 1 }, events[0]?.id],
        ['B', 1, { n: 2 }, events[1]?.id],
      ]);
      expect(read[0]?.metadata).toMatchObject({ actor: 'tester', requestId: 'r1', correlationId: 'c1' });
      expect(read[1]?.position).toBe(result.position);
      expect((read[0]?.position ?? 0n) < (read[1]?.position ?? 0n)).toBe(true);
    });

    it('refuses a wrong expected revision and no_stream on an existing stream', async () => {
      const store = await open();
      const stream = `${freshCategory()}-${randomUUID()}`;
      await store.append({ stream, expected: 'no_stream', events: [anEvent()] });
      await expect(store.append({ stream, expected: 'no_stream', events: [anEvent()] })).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await expect(store.append({ stream, expected: 5, events: [anEvent()] })).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      await expect(store.append({ stream: `${freshCategory()}-x`, expected: 0, events: [anEvent()] })).rejects.toBeInstanceOf(
        WrongExpectedRevisionError,
      );
      const ok = await store.append({ stream, expected: 0, events: [anEvent()] });
      expect(ok.revision).toBe(1);
    });

    it('treats a retried append with the same event ids as a no-op answering the first result', async () => {
      const store = await open();
      const stream = `${freshCategory()}-${randomUUID()}`;
      // Ids repeat only when derived from an Idempotency-Key, which the events then carry.
      const keyed = (e: NewEvent): NewEvent => ({ ...e, metadata: { ...e.metadata, idempotencyKey: 'k1' } });
      const events = [keyed(anEvent()), keyed(anEvent())];
      const first = await store.append({ stream, expected: 'no_stream', events });
      const retry = await store.append({ stream, expected: 'no_stream', events });
      expect(retry).toEqual({ ...first, duplicate: true });
      expect(first.duplicate).not.toBe(true);
      // also after the stream has moved on
      await store.append({ stream, expected: 1, events: [anEvent()] });
      expect(await store.append({ stream, expected: 'no_stream', events })).toEqual({ ...first, duplicate: true });
      expect(await store.readStream(stream)).toHaveLength(3);
    });

    it('reads a stream from a revision: the tail from inside, nothing from past the end', async () => {
      const store = await open();
      const stream = `${freshCategory()}-${randomUUID()}`;
      await store.append({ stream, expected: 'no_stream', events: [anEvent(), anEvent(), anEvent()] });
      expect((await store.readStream(stream, { from: 1 })).map((e) => e.revision)).toEqual([1, 2]);
      expect((await store.readStream(stream, { from: 0 })).map((e) => e.revision)).toEqual([0, 1, 2]);
      expect(await store.readStream(stream, { from: 3 })).toEqual([]);
      expect((await store.readStream(stream, { from: 1, limit: 1 })).map((e) => e.revision)).toEqual([1]);
      expect((await store.readStream(stream, { limit: 2 })).map((e) => e.revision)).toEqual([0, 1]);
      expect(await store.readStream(`${freshCategory()}-${randomUUID()}`, { from: 2 })).toEqual([]);
    });

    it('reads a missing stream as empty and a missing code as undefined', async () => {
      const store = await open();
      expect(await store.readStream(`${freshCategory()}-${randomUUID()}`)).toEqual([]);
      expect(await store.findCode({ scope: freshCategory(), code: 'NONE' })).toBeUndefined();
    });

    it('resumes reading all from any position it handed out, and measures distance forward', async () => {
      const store = await open();
      const c = freshCategory();
      const stream = `${c}-${randomUUID()}`;
      await store.append({ stream, expected: 'no_stream', events: [anEvent(), anEvent(), anEvent()] });
      const all = await store.readAll({ after: 0n, limit: 10, categories: [c] });
      const [p0, p1, p2] = all.map((e) => e.position);
      if (p0 === undefined || p1 === undefined || p2 === undefined) throw new Error('three events expected');
      expect((await store.readAll({ after: p0, limit: 10, categories: [c] })).map((e) => e.position)).toEqual([p1, p2]);
      expect(await store.readAll({ after: p2, limit: 10, categories: [c] })).toEqual([]);
      expect(store.distance(p0, p2)).toBeGreaterThan(0);
      expect(store.distance(p2, p0)).toBe(0);
      expect(store.distance(p1, p1)).toBe(0);
    });

    it('of concurrent appends at one expected revision exactly one wins', async () => {
      const store = await open();
      const stream = `${freshCategory()}-${randomUUID()}`;
      await store.append({ stream, expected: 'no_stream', events: [anEvent()] });
      const results = await Promise.allSettled(
        Array.from({ length: 10 }, () => store.append({ stream, expected: 0, events: [anEvent()] })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'rejected').every((r) => r.reason instanceof WrongExpectedRevisionError)).toBe(true);
    });

    it('reserves a code for one stream atomically: of many claimants exactly one wins', async () => {
      const store = await open();
      const scope = freshCategory();
      const claims = Array.from({ length: 16 }, () =>
        store.append({ stream: `${scope}-${randomUUID()}`, expected: 'no_stream', events: [anEvent()], claim: [{ scope, code: 'ONE' }] }),
      );
      const results = await Promise.allSettled(claims);
      const winners = results.filter((r) => r.status === 'fulfilled');
      expect(winners).toHaveLength(1);
      expect(results.filter((r) => r.status === 'rejected').every((r) => r.reason instanceof CodeTakenError)).toBe(true);
      const holder = await store.findCode({ scope, code: 'ONE' });
      expect(holder?.startsWith(`${scope}-`)).toBe(true);
      // the losers wrote nothing: their streams do not exist
      const all = await store.readAll({ after: 0n, limit: 1000, categories: [scope] });
      expect(all).toHaveLength(1);
    });

    it('reads all without a category as it does with one: record streams only, never a code reservation', async () => {
      const store = await open();
      const scope = freshCategory();
      const before = await store.headPosition();
      const stream = `${scope}-${randomUUID()}`;
      await store.append({ stream, expected: 'no_stream', events: [anEvent()], claim: [{ scope, code: 'Z' }] });
      const all = await store.readAll({ after: before, limit: 1000 });
      expect(all.map((e) => e.stream).filter((s) => s.startsWith(scope))).toEqual([stream]);
    });

    it('releases and moves codes with the append that changes them', async () => {
      const store = await open();
      const scope = freshCategory();
      const a = `${scope}-${randomUUID()}`;
      const b = `${scope}-${randomUUID()}`;
      await store.append({ stream: a, expected: 'no_stream', events: [anEvent()], claim: [{ scope, code: 'X' }] });
      await store.append({ stream: a, expected: 0, events: [anEvent()], claim: [{ scope, code: 'Y' }], release: [{ scope, code: 'X' }] });
      expect(await store.findCode({ scope, code: 'X' })).toBeUndefined();
      expect(await store.findCode({ scope, code: 'Y' })).toBe(a);
      await store.append({ stream: b, expected: 'no_stream', events: [anEvent()], claim: [{ scope, code: 'X' }] });
      await expect(store.append({ stream: b, expected: 0, events: [anEvent()], claim: [{ scope, code: 'Y' }] })).rejects.toBeInstanceOf(
        CodeTakenError,
      );
      // a failed claim leaves nothing behind: b is still at revision 0
      expect(await store.readStream(b)).toHaveLength(1);
      // a stream re-claiming its own code is fine
      await store.append({ stream: a, expected: 1, events: [anEvent()], claim: [{ scope, code: 'Y' }] });
    });

    it('reads all in global order from a position, filtered by category, in pages', async () => {
      const store = await open();
      const [c1, c2] = [freshCategory(), freshCategory()];
      const streams = [`${c1}-${randomUUID()}`, `${c2}-${randomUUID()}`, `${c1}-${randomUUID()}`];
      for (const s of streams) await store.append({ stream: s, expected: 'no_stream', events: [anEvent(), anEvent()] });
      const mine = await store.readAll({ after: 0n, limit: 100, categories: [c1] });
      expect(mine.map((e) => e.stream)).toEqual([streams[0], streams[0], streams[2], streams[2]]);
      const both = await store.readAll({ after: 0n, limit: 100, categories: [c1, c2] });
      expect(both).toHaveLength(6);
      const positions = both.map((e) => e.position);
      expect([...positions].sort((a, b) => (a < b ? -1 : 1))).toEqual(positions);
      const page = await store.readAll({ after: positions[1] ?? 0n, limit: 2, categories: [c1, c2] });
      expect(page.map((e) => e.position)).toEqual(positions.slice(2, 4));
      expect(await store.headPosition()).toBeGreaterThanOrEqual(positions.at(-1) ?? 0n);
    });

    it('reads all filtered by event type, the limit counting only the events that match', async () => {
      const store = await open();
      const c = freshCategory();
      const stream = `${c}-${randomUUID()}`;
      const types = ['Rare', 'Common', 'Common', 'Common', 'Rare', 'Common', 'Other', 'Rare'];
      await store.append({ stream, expected: 'no_stream', events: types.map((t) => anEvent(t)) });
      const rare = await store.readAll({ after: 0n, limit: 100, categories: [c], types: ['Rare'] });
      expect(rare.map((e) => e.revision)).toEqual([0, 4, 7]);
      // A full page of matches, then the rest, then nothing: the same events as one read.
      const first = await store.readAll({ after: 0n, limit: 2, categories: [c], types: ['Rare', 'Other'] });
      expect(first.map((e) => e.revision)).toEqual([0, 4]);
      const rest = await store.readAll({ after: first.at(-1)?.position ?? 0n, limit: 2, categories: [c], types: ['Rare', 'Other'] });
      expect(rest.map((e) => e.revision)).toEqual([6, 7]);
      expect(await store.readAll({ after: rest.at(-1)?.position ?? 0n, limit: 2, categories: [c], types: ['Rare', 'Other'] })).toEqual([]);
      expect(await store.readAll({ after: 0n, limit: 10, categories: [c], types: [] })).toEqual([]);
    });

    it('purges streams for good: reads answer nothing, positions are never handed out again', async () => {
      const store = await open();
      const c = freshCategory();
      const gone = `${c}-${randomUUID()}`;
      const kept = `${c}-${randomUUID()}`;
      await store.append({ stream: gone, expected: 'no_stream', events: [anEvent('A'), anEvent('B')] });
      const last = await store.append({ stream: kept, expected: 'no_stream', events: [anEvent('C')] });
      // The newest event of the log purged too: the head must not go back, nor a position come again.
      const newest = await store.append({ stream: gone, expected: 1, events: [anEvent('D')] });
      const headBefore = await store.headPosition();
      expect(await store.purge([gone, `${c}-${randomUUID()}`])).toBe(3);
      expect(await store.readStream(gone)).toEqual([]);
      expect((await store.readStream(kept)).map((e) => e.type)).toEqual(['C']);
      expect(await store.headPosition()).toBeGreaterThanOrEqual(headBefore);
      const after = await store.append({ stream: `${c}-${randomUUID()}`, expected: 'no_stream', events: [anEvent('E')] });
      expect(after.position > newest.position && after.position > last.position).toBe(true);
      // A second purge finds nothing left to remove.
      expect(await store.purge([gone])).toBe(0);
      // readAll may still return purged events until the store reclaims them (KurrentDB's
      // scavenge), never any other change: the kept and later events are there in order.
      const all = (await store.readAll({ after: 0n, limit: 100, categories: [c] })).map((e) => e.type);
      expect(all.filter((t) => t === 'C' || t === 'E')).toEqual(['C', 'E']);
    });

    it('appends to many streams at once, each judged alone and answered in order', async () => {
      const store = await open();
      const c = freshCategory();
      const keyed = (e: NewEvent): NewEvent => ({ ...e, metadata: { ...e.metadata, idempotencyKey: 'k' } });
      const existing = `${c}-${randomUUID()}`;
      const holder = `${c}-${randomUUID()}`;
      const earlier = [keyed(anEvent('Earlier'))];
      const first = await store.append({ stream: existing, expected: 'no_stream', events: earlier });
      await store.append({ stream: holder, expected: 'no_stream', events: [anEvent()], claim: [{ scope: c, code: 'HELD' }] });
      const fresh = Array.from({ length: 20 }, (_, i) => ({
        stream: `${c}-${randomUUID()}`,
        expected: 'no_stream' as const,
        events: [anEvent('New', { i })],
      }));
      const seen: bigint[] = [];
      const off = store.onAppended((p) => seen.push(p));
      const outcomes = await store.appendMany([
        ...fresh.slice(0, 10),
        // A repeat of an append already in the log: its first result, nothing written.
        { stream: existing, expected: 'no_stream', events: earlier },
        // A new event where the stream is there already, and a code another stream holds: refused.
        { stream: existing, expected: 'no_stream', events: [anEvent('Refused')] },
        { stream: `${c}-${randomUUID()}`, expected: 'no_stream', events: [anEvent('Refused')], claim: [{ scope: c, code: 'HELD' }] },
        ...fresh.slice(10),
      ]);
      off();
      expect(outcomes).toHaveLength(23);
      const [repeat, conflict, taken] = outcomes.slice(10, 13);
      expect(repeat).toEqual({ ok: true, result: { ...first, duplicate: true } });
      expect(conflict?.ok === false && conflict.error).toBeInstanceOf(WrongExpectedRevisionError);
      expect(taken?.ok === false && taken.error).toBeInstanceOf(CodeTakenError);
      const landed = [...outcomes.slice(0, 10), ...outcomes.slice(13)].map((o) => (o.ok ? o.result : undefined));
      expect(landed.every((r) => r?.revision === 0 && r.duplicate !== true)).toBe(true);
      // Each new stream holds its own event, at the position its outcome named; nothing refused is in the log.
      for (const [i, request] of fresh.entries()) {
        const [event, ...more] = await store.readStream(request.stream);
        expect(more).toEqual([]);
        expect([event?.data, event?.position]).toEqual([{ i }, landed[i]?.position]);
      }
      const all = await store.readAll({ after: 0n, limit: 100, categories: [c] });
      expect(all.map((e) => e.type).sort()).toEqual(['Earlier', 'ThingHappened', ...fresh.map(() => 'New')].sort());
      expect(await store.findCode({ scope: c, code: 'HELD' })).toBe(holder);
      expect(seen.at(-1)).toBeGreaterThanOrEqual(landed.reduce((max, r) => ((r?.position ?? 0n) > max ? (r?.position ?? 0n) : max), 0n));
    });

    it('lands one of two new appends to one stream in an appendMany, and a copy of an append once', async () => {
      const store = await open();
      const c = freshCategory();
      const contested = `${c}-${randomUUID()}`;
      const copied = `${c}-${randomUUID()}`;
      const copy = [{ ...anEvent('Copied'), metadata: { actor: 'tester', at: new Date().toISOString(), idempotencyKey: 'k' } }];
      const outcomes = await store.appendMany([
        { stream: contested, expected: 'no_stream', events: [anEvent('One')] },
        { stream: copied, expected: 'no_stream', events: copy },
        { stream: contested, expected: 'no_stream', events: [anEvent('Other')] },
        { stream: copied, expected: 'no_stream', events: copy },
      ]);
      const [one, first, other, second] = outcomes;
      expect([one?.ok, other?.ok].filter((ok) => ok === true)).toHaveLength(1);
      const loser = [one, other].find((o) => o?.ok === false);
      expect(loser?.ok === false && loser.error).toBeInstanceOf(WrongExpectedRevisionError);
      expect(await store.readStream(contested)).toHaveLength(1);
      expect(first?.ok === true && second?.ok === true && first.result.position === second.result.position).toBe(true);
      expect((await store.readStream(copied)).map((e) => e.type)).toEqual(['Copied']);
      expect(await store.appendMany([])).toEqual([]);
    });

    it('tells listeners of every committed append', async () => {
      const store = await open();
      const seen: bigint[] = [];
      const off = store.onAppended((p) => seen.push(p));
      const r = await store.append({ stream: `${freshCategory()}-${randomUUID()}`, expected: 'no_stream', events: [anEvent()] });
      off();
      expect(seen.at(-1)).toBeGreaterThanOrEqual(r.position);
    });
  });
}
