// admin replay's fold (cli/replay.ts) against GET ?asOf=T: the events of the real log, given to
// the fold as the audit feed shapes them, give every record as the service answers for that time.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resources } from '../../cli/resources.ts';
import { Replay, type FeedEvent } from '../../cli/replay.ts';
import { modules } from '../../modules/index.ts';
import type { EventStore } from '../../domain/ports.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { manualClock, startTestApp, type TestApp } from '../support/testApp.ts';
import { replayTimeline } from './support.ts';

let t: TestApp;
let eventStore: EventStore;
const clock = manualClock();

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'admin-cli-replay-'));
  const stores = openEmbeddedStores(dataDir);
  eventStore = stores.eventStore;
  t = await startTestApp({ dataDir, clock, stores });
});
afterAll(async () => {
  await t.close();
});

/** The log as the audit feed gives it (API.md "Audit feed"). */
async function feed(): Promise<FeedEvent[]> {
  const events: FeedEvent[] = [];
  for (let after = 0n; ;) {
    const batch = await eventStore.readAll({ after, limit: 500 });
    for (const e of batch)
      events.push({
        position: e.position.toString(),
        stream: e.stream,
        version: e.revision,
        type: e.type,
        at: e.metadata.at,
        actor: e.metadata.actor,
        data: e.data,
      });
    if (batch.length < 500) return events;
    after = batch.at(-1)?.position ?? after;
  }
}

describe('the replay fold', () => {
  it('knows every resource the service declares', () => {
    const served = modules
      .flatMap((m) => m.resources ?? [])
      .map((r) => r.definition.path)
      .sort();
    expect(resources.map((r) => r.path).sort()).toEqual(served);
  });

  it('equals GET ?asOf=T one by one for records created, replaced, patched and deleted before and after T', async () => {
    const { until, touched } = await replayTimeline(t, clock);
    const replay = new Replay(resources, new Date(until));
    for (const e of await feed()) replay.add(e);
    const replayed = new Map(replay.records().flatMap((r) => r.records.map((rec) => [`${r.resource.path}/${rec.id}`, rec])));

    let live = 0;
    let absent = 0;
    for (const { path, id } of touched) {
      const res = await t.call({ method: 'GET', url: `/api/v1/${path}/${id}?asOf=${encodeURIComponent(until)}` });
      const mine = replayed.get(`${path}/${id}`);
      if (res.statusCode === 404) {
        expect(mine, `${path}/${id} is not live at T`).toBeUndefined();
        absent++;
      } else {
        expect(res.statusCode).toBe(200);
        expect(mine, `${path}/${id}`).toEqual(res.json());
        live++;
      }
    }
    // Both outcomes were exercised: records live at T and records deleted or not yet created.
    expect(live).toBeGreaterThanOrEqual(12);
    expect(absent).toBe(2);
    // Nothing extra: every replayed record of these resources was touched by the timeline or the samples' references.
    expect(replayed.size).toBeGreaterThanOrEqual(live);
  });
});
