// Figures 4 and 5 of `npm run bench` (bench/http.ts): a peer, Emmett's SQLite event store
// (@event-driven-io/emmett-sqlite, bench/emmett/server.ts) behind the same fastify route, against
// ours, both on fresh data folders.
//
//   4. HTTP create: baseline E is the peer's POST /api/v1/user-group-types appending one event to a
//      new stream through a decider's command handler. Goal: ours at least 1.5x.
//   5. HTTP get one: baseline F is the peer's GET /api/v1/user-group-types/{id} aggregating the
//      stream; each side rotates over the records it created in 4. Goal: at least 1x.
//
// bench/http.ts's header says what the peer does less than ours and how the durability of both
// sides is read and compared; Emmett is installed into bench/emmett/node_modules on the first peer
// run (bench/emmett/install.ts), never by the project's npm install.

import { LOG_PRAGMAS } from './common.ts';
import type { PeerInstall } from './emmett/install.ts';
import {
  alternate,
  creates,
  fmt,
  json,
  keepInto,
  RESOURCE,
  rotatingGet,
  segment,
  startServer,
  waitForProjections,
  x,
  type Durability,
  type HttpOptions,
  type Pair,
  type Row,
} from './httpSupport.ts';

type PeerFigures = { create: Pair; get: Pair; ours: Durability; theirs: Durability; equal: boolean };

/** Our event log's settings, as its pragmas set them. */
function ourDurability(): Durability {
  const pragma = (name: string): string => new RegExp(`${name}\\s*=\\s*(\\w+)`, 'i').exec(LOG_PRAGMAS)?.[1]?.toUpperCase() ?? '?';
  return { journalMode: pragma('journal_mode'), synchronous: pragma('synchronous'), sqlite: process.versions.sqlite ?? '?' };
}

const describe = (d: Durability): string => `${d.journalMode} + synchronous=${d.synchronous}`;
const sameDurability = (a: Durability, b: Durability): boolean => a.journalMode === b.journalMode && a.synchronous === b.synchronous;

function durabilityLine(ours: Durability, theirs: Durability): string {
  const verdict = sameDurability(ours, theirs)
    ? "equal (Emmett sets only journal_mode; synchronous is SQLite's default)"
    : "NOT equal: Emmett's cannot be set (it opens a connection per operation, with no hook before its transaction)";
  return `  durability: ours ${describe(ours)} (node:sqlite ${ours.sqlite ?? '?'}), Emmett ${describe(theirs)} (sqlite3 addon, SQLite ${theirs.sqlite ?? '?'}): ${verdict}`;
}

async function peerFigures(o: HttpOptions, install: Extract<PeerInstall, { ok: true }>): Promise<PeerFigures> {
  const service = await startServer('service');
  try {
    const peer = await startServer('emmett');
    try {
      const ours = ourDurability();
      const theirs = peer.durability ?? { journalMode: '?', synchronous: '?' };
      console.log(`Peer: Emmett (@event-driven-io/emmett-sqlite ${install.version}), fresh data folders on both sides`);
      console.log(durabilityLine(ours, theirs));
      console.log(`HTTP create vs Emmett: ${String(o.connections)} connections, ${segment(o)}`);
      const headers = { ...json, authorization: `Bearer ${service.token}` };
      const ourIds: string[] = [];
      const theirIds: string[] = [];
      const create = await alternate(
        o,
        ['E Emmett POST', 'POST service'],
        { url: peer.url, requests: creates(RESOURCE, json, keepInto(theirIds)) },
        { url: service.url, requests: creates(RESOURCE, headers, keepInto(ourIds)) },
        async () => {
          await waitForProjections(service);
        },
      );
      if (ourIds.length === 0 || theirIds.length === 0) throw new Error('the peer figure created no record on one side');
      console.log(
        `HTTP get one vs Emmett: ${String(o.connections)} connections, rotating over ${String(theirIds.length)} (Emmett) and ${String(ourIds.length)} (ours) ids, ${segment(o)}`,
      );
      const get = await alternate(o, ['F Emmett GET', 'GET service'], rotatingGet(peer, theirIds), rotatingGet(service, ourIds));
      return { create, get, ours, theirs, equal: sameDurability(ours, theirs) };
    } finally {
      await peer.stop();
    }
  } finally {
    await service.stop();
  }
}

/** The peer was measured, or why not. */
export type PeerOutcome = PeerFigures | { skipped: string };

/** 4 and 5 once Emmett is installed (bench/http.ts installs it before any figure, so that its
 * compile weighs on none), or why not (`undefined`: --no-peer). */
export async function peer(o: HttpOptions, install: PeerInstall | undefined): Promise<PeerOutcome> {
  if (install === undefined) return { skipped: '--no-peer' };
  if (!install.ok) {
    console.log(`Peer: not measured: ${install.reason}`);
    process.exitCode = 1;
    return { skipped: install.reason };
  }
  return peerFigures(o, install);
}

export function peerRows(p: PeerOutcome, connections: number): Row[] {
  if ('skipped' in p) return [];
  const durability = p.equal ? `${describe(p.ours)} both` : `ours ${describe(p.ours)}, Emmett ${describe(p.theirs)}`;
  return [
    [
      `HTTP create vs Emmett, ${String(connections)} conn, ${durability}`,
      `${fmt(p.create.base.rate)}/s (E, Emmett)`,
      `${fmt(p.create.measured.rate)}/s`,
      x(p.create.ratio),
      '≥ 1.5x',
      p.create.ratio >= 1.5,
    ],
    [
      `HTTP get one vs Emmett, ${String(connections)} conn`,
      `${fmt(p.get.base.rate)}/s (F, Emmett)`,
      `${fmt(p.get.measured.rate)}/s`,
      x(p.get.ratio),
      '≥ 1x',
      p.get.ratio >= 1,
    ],
  ];
}
