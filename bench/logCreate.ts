// Figure 9 of `npm run bench` (bench/http.ts; alone: `npm run bench -- --only logs`): log creates
// over HTTP. Baseline A again (one INSERT transaction per request); measured is POST /api/v1/logs
// on a fresh service, each a new log of one log type (its reference checked in the log) with a
// fresh correlationId, 100 owners in turn and a request and response of about 300 characters.
// Goal: at least 2,000/s (the issue's, absolute), so the ratio to A is printed beside it.

import { randomUUID } from 'node:crypto';
import type { Request } from 'autocannon';
import {
  alternate,
  creates,
  fmt,
  json,
  runTag,
  segment,
  startServer,
  waitForProjections,
  x,
  type HttpOptions,
  type Pair,
  type Row,
} from './httpSupport.ts';

const LOG_TYPE = `BENCH_${runTag}`;
/** Creates a second achieves at least this (the goal for logs). */
const LOG_CREATE_GOAL = 2000;
let logCounter = 0;
function logBody(): string {
  const n = logCounter++;
  const startDate = new Date(Date.now() - 1500).toISOString();
  return JSON.stringify({
    ownerType: 'ORDER',
    ownerId: `O-${String(n % 100)}`,
    logTypeCode: LOG_TYPE,
    startDate,
    endDate: new Date().toISOString(),
    request: `POST /orders/${String(n)} ${'{"item":"x","quantity":1}'.repeat(6)}`,
    response: `201 Created ${'{"status":"accepted"}'.repeat(6)}`,
    resultCode: '201',
    correlationId: randomUUID(),
    module: 'bench',
  });
}

export async function logFigure(o: HttpOptions): Promise<Pair> {
  const service = await startServer('service');
  const raw = await startServer('raw-insert');
  try {
    const headers = { ...json, authorization: `Bearer ${service.token}` };
    const type = await fetch(`${service.url}/api/v1/log-types`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ code: LOG_TYPE, name: 'Bench log type' }),
    });
    if (type.status !== 201) throw new Error(`the bench's log type was refused: ${String(type.status)} ${await type.text()}`);
    const logs: Request[] = [{ method: 'POST', path: '/api/v1/logs', headers, setupRequest: (req) => ({ ...req, body: logBody() }) }];
    console.log(`HTTP log create: ${String(o.connections)} connections, ${segment(o)}`);
    let catchUp = 0;
    const pair = await alternate(
      o,
      ['A raw insert', 'POST logs'],
      { url: raw.url, requests: creates('/raw', json) },
      { url: service.url, requests: logs },
      async () => {
        catchUp = Math.max(catchUp, await waitForProjections(service));
      },
    );
    console.log(`  (projections caught up within ${catchUp.toFixed(0)} ms after each round)`);
    return pair;
  } finally {
    await raw.stop();
    await service.stop();
  }
}

export function logRows(l: Pair, connections: number): Row[] {
  return [
    [
      `HTTP log create, ${String(connections)} conn`,
      `${fmt(l.base.rate)}/s (A)`,
      `${fmt(l.measured.rate)}/s`,
      x(l.ratio),
      `≥ ${fmt(LOG_CREATE_GOAL)}/s`,
      l.measured.rate >= LOG_CREATE_GOAL,
    ],
    ['HTTP log create p99', `${String(l.base.p99)} ms (A)`, `${String(l.measured.p99)} ms`, '—', 'reported', true],
  ];
}
