// Figures 1 and 2 of `npm run bench` (bench/http.ts): one service, created records first.
//
//   1. HTTP create: baseline A is a bare fastify route doing one INSERT transaction per request on
//      node:sqlite (WAL, synchronous=FULL); measured is POST /api/v1/user-group-types, each request
//      a fresh code.
//   2. HTTP get one: baseline B is a bare fastify route returning constant JSON; measured is
//      GET /api/v1/user-group-types/{id} rotating over records created before (the warm-up's).

import { resolve } from 'node:path';
import {
  alternate,
  creates,
  fmt,
  json,
  keepInto,
  load,
  pct,
  RESOURCE,
  rotatingGet,
  segment,
  startServer,
  waitForProjections,
  x,
  type HttpOptions,
  type Pair,
  type Row,
  type Server,
} from './httpSupport.ts';

export type HttpFigures = { create: Pair; get: Pair };

async function createFigure(o: HttpOptions, service: Server, headers: Record<string, string>): Promise<Pair> {
  const raw = await startServer('raw-insert');
  try {
    let catchUp = 0;
    const pair = await alternate(
      o,
      ['A raw insert', 'POST service'],
      { url: raw.url, requests: creates('/raw', json) },
      { url: service.url, requests: creates(RESOURCE, headers) },
      async () => {
        catchUp = Math.max(catchUp, await waitForProjections(service));
      },
    );
    console.log(`  (projections caught up within ${catchUp.toFixed(0)} ms after each round)`);
    return pair;
  } finally {
    await raw.stop();
  }
}

async function getFigure(o: HttpOptions, service: Server, ids: readonly string[]): Promise<Pair> {
  const constant = await startServer('const');
  try {
    return await alternate(o, ['B constant JSON', 'GET service'], { url: `${constant.url}/const` }, rotatingGet(service, ids));
  } finally {
    await constant.stop();
  }
}

/** `profile`: a folder to write the service's CPU profiles to (--cpu-prof), or none. */
export async function httpFigures(o: HttpOptions, profile?: string): Promise<HttpFigures> {
  const service = await startServer('service', profile === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${resolve(profile)}`]);
  try {
    const headers = { ...json, authorization: `Bearer ${service.token}` };
    // Records for the reads to rotate over (these creates also warm the service up).
    const ids: string[] = [];
    await load({ url: service.url, requests: creates(RESOURCE, headers, keepInto(ids)) }, o.warmup, o.connections);
    if (ids.length === 0) throw new Error('no record was created');
    await waitForProjections(service);

    console.log(`HTTP create: ${String(o.connections)} connections, ${segment(o)}`);
    const create = await createFigure(o, service, headers);
    console.log(`HTTP get one: ${String(o.connections)} connections, rotating over ${String(ids.length)} ids, ${segment(o)}`);
    const get = await getFigure(o, service, ids);
    return { create, get };
  } finally {
    await service.stop();
  }
}

export function httpRows({ create, get }: HttpFigures, connections: number): Row[] {
  return [
    [
      `HTTP create, ${String(connections)} conn`,
      `${fmt(create.base.rate)}/s (A)`,
      `${fmt(create.measured.rate)}/s`,
      x(create.ratio),
      '≥ 1.3x',
      create.ratio >= 1.3,
    ],
    ['HTTP create p99', `${String(create.base.p99)} ms (A)`, `${String(create.measured.p99)} ms`, '—', '< 30 ms', create.measured.p99 < 30],
    [
      `HTTP get one, ${String(connections)} conn`,
      `${fmt(get.base.rate)}/s (B)`,
      `${fmt(get.measured.rate)}/s`,
      pct(get.ratio),
      '≥ 40%',
      get.ratio >= 0.4,
    ],
    ['HTTP get one p99', `${String(get.base.p99)} ms (B)`, `${String(get.measured.p99)} ms`, '—', '< 10 ms', get.measured.p99 < 10],
  ];
}
