// Responses that carry many records are written a few records at a time: a result can be as large
// as its page size times the largest record (512 KiB), more than one string may hold, so no answer
// is ever built whole. The ids come from one query, so the membership and order of the answer are
// those of one moment; each record is then read as it is when its turn comes (one deleted in
// between is left out).

import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { Document, ReadStore } from '../domain/ports.ts';
import { pageOf } from '../domain/shared/page.ts';

const CHUNK = 50;

export async function* documentsOf(readStore: ReadStore, collection: string, ids: readonly string[]): AsyncGenerator<Document> {
  for (let i = 0; i < ids.length; i += CHUNK) {
    const chunk = ids.slice(i, i + CHUNK);
    const found = await readStore.getMany(collection, chunk);
    for (const id of chunk) {
      const doc = found.get(id)?.doc;
      if (doc) yield doc;
    }
  }
}

/** Bytes of an answer made between two turns of the event loop: a socket on loopback drains as
 * fast as items are made, so without a pause one large answer would hold every other request. */
const TURN_BYTES = 256 * 1024;

async function* arrayText(docs: AsyncIterable<unknown> | Iterable<unknown>, counted: { n: number }): AsyncGenerator<string> {
  yield '[';
  let sinceTurn = 0;
  for await (const doc of docs) {
    const text = (counted.n === 0 ? '' : ',') + JSON.stringify(doc);
    yield text;
    counted.n += 1;
    sinceTurn += text.length;
    if (sinceTurn >= TURN_BYTES) {
      sinceTurn = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  yield ']';
}

const sendJson = (reply: FastifyReply, text: AsyncGenerator<string>): FastifyReply =>
  reply.type('application/json; charset=utf-8').send(Readable.from(text));

/** A JSON array of the records with these ids, in this order. */
export function sendDocuments(reply: FastifyReply, readStore: ReadStore, collection: string, ids: readonly string[]): FastifyReply {
  return sendJson(reply, arrayText(documentsOf(readStore, collection, ids), { n: 0 }));
}

/** A JSON array of items made one at a time. */
export function sendItems(reply: FastifyReply, items: Iterable<unknown> | AsyncIterable<unknown>): FastifyReply {
  return sendJson(reply, arrayText(items, { n: 0 }));
}

/** The page shape of paged search around the records with these ids; its counts are written after
 * the content, from what was actually sent. */
export function sendPage(
  reply: FastifyReply,
  source: { readStore: ReadStore; collection: string; ids: readonly string[] },
  page: { total: number; number: number; size: number; sorted: boolean },
): FastifyReply {
  async function* text(): AsyncGenerator<string> {
    const counted = { n: 0 };
    yield '{"content":';
    yield* arrayText(documentsOf(source.readStore, source.collection, source.ids), counted);
    const { content: _content, ...rest } = pageOf([], page.total, page.number, page.size, page.sorted);
    yield `,${JSON.stringify({ ...rest, numberOfElements: counted.n, empty: counted.n === 0 }).slice(1)}`;
  }
  return sendJson(reply, text());
}
