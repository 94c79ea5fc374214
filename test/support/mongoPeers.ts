// The MongoDB-protocol servers ("peers") the MongoDB adapters' suites run on, declared once:
// FerretDB, started for the run by ferretdb.globalSetup.ts wherever Go builds it, and MongoDB
// itself against MONGODB_URL or in a container (testcontainers) where an engine exists. A suite is
// declared once and runs per peer; a missing peer is a skipped suite whose title says why.
//
// FerretDB is not MongoDB. What it lacks of what the adapter uses is listed below, test by test,
// with FerretDB's own error (or, where it answers without one, how its answer differs). Such a test
// still runs on FerretDB and passes only when it fails that way, so a FerretDB that learns it makes
// the test say so; on MongoDB every test runs as written.

import { randomUUID } from 'node:crypto';
import { MongoDBContainer, type StartedMongoDBContainer } from '@testcontainers/mongodb';
import { MongoClient, type CommandStartedEvent, type Document as BsonDocument } from 'mongodb';
import { afterAll, beforeAll, describe, inject, it } from 'vitest';
import { IMAGES, planTarget } from './containers.ts';
import type { PeerLimit, PeerLimits } from './peerLimits.ts';

export type MongoPeer = {
  /** e.g. "FerretDB v1.24.2", "MongoDB (testcontainers, mongo:8.0.4)". */
  name: string;
  kind: 'ferretdb' | 'mongodb';
  /** Starts it when it is a container; answers its URL. */
  start: () => Promise<string>;
  stop: () => Promise<void>;
  limits: PeerLimits;
};

/** The container's replica set names its member by an address only the container knows. */
const direct = (connectionString: string): string =>
  connectionString.includes('?')
    ? `${connectionString}&directConnection=true`
    : `${connectionString.replace(/\/?$/, '/')}?directConnection=true`;

const unsupported = (error: string): PeerLimit => ({ error });

/** FerretDB's regular expressions are Go's (RE2): no lookahead, which LIKE uses to end a match
 * and to commit to a segment between two `%` without backtracking (query.ts, likeRegex). */
const NO_LOOKAHEAD = unsupported('Regular expression is invalid: unrecognized character after (? or (?-');
/** Autocomplete's pipeline joins the paths' values with $concatArrays. */
const NO_CONCAT_ARRAYS = unsupported('The operator $concatArrays is not implemented yet');
/** An array column's IS_NULL / IS_NOT_NULL look for a non-null element. */
const NO_ELEM_MATCH_NE = unsupported('$elemMatch: support for $ne not implemented yet');
/** A nested negation: no element matching, inside $elemMatch. */
const NO_ELEM_MATCH_NOR = unsupported('$elemMatch: support for $nor not implemented yet');
/** Nested conditions: one element of an array of documents matching them as a whole. */
const ELEM_MATCH_OVER_DOCUMENTS: PeerLimit = {
  differs: "$elemMatch with conditions on the elements' fields selects no document, without an error",
};

const UNSTEADY = 'timing-dependent; failed in some runs on FerretDB, cause not established';

/** What FerretDB 1.24 lacks of what the adapter uses, by the title of the test that shows it (the
 * read-store contract's filtering fixtures and tests, and the server suite's). */
const FERRETDB_LIMITS: Readonly<Record<string, PeerLimit>> = {
  'string LIKE % suffix': NO_LOOKAHEAD,
  'string LIKE a backslash before another character is a backslash': NO_LOOKAHEAD,
  'string LIKE non-ASCII between wildcards': NO_LOOKAHEAD,
  'uuid LIKE': NO_LOOKAHEAD,
  'any LIKE non-ASCII with wildcards': NO_LOOKAHEAD,
  'any LIKE a NUL with non-ASCII': NO_LOOKAHEAD,
  '{"filter":[{"column":"name","operator":"LIKE","value":"%bc"}]}': NO_LOOKAHEAD,
  '{"filter":[{"column":"name","operator":"LIKE","value":"a%c"}]}': NO_LOOKAHEAD,
  '{"filter":[{"column":"name","operator":"LIKE","value":"a_bc"}]}': NO_LOOKAHEAD,

  'puts values starting with the term first, then values containing it, each alphabetically': NO_CONCAT_ARRAYS,
  'answers at most limit values': NO_CONCAT_ARRAYS,
  'searches only the given paths': NO_CONCAT_ARRAYS,
  'takes the term literally and folds non-ASCII case': NO_CONCAT_ARRAYS,
  'lists every distinct value for an empty term': NO_CONCAT_ARRAYS,
  'autocompletes as the SQLite store does': NO_CONCAT_ARRAYS,
  // Tests of other things that also autocomplete.
  'never appears in what find, findIds, scan or autocomplete answer': NO_CONCAT_ARRAYS,
  'indexes documents written before the paths were declared, for LIKE and autocomplete too': NO_CONCAT_ARRAYS,
  'sees every write: inserts, renames, deletes and documents brought back': NO_CONCAT_ARRAYS,
  'replaces the documents, keeps tombstones, sets the checkpoint, and the indexes serve the load': NO_CONCAT_ARRAYS,

  'string array IS_NULL: missing, null or empty': NO_ELEM_MATCH_NE,
  'string array IS_NOT_NULL': NO_ELEM_MATCH_NE,
  'uuid array IS_NULL': NO_ELEM_MATCH_NE,

  'nested NOT_EQ: some element differs': NO_ELEM_MATCH_NOR,
  'nested NOT_IN: some element outside': NO_ELEM_MATCH_NOR,
  'nested array property IS_NULL': NO_ELEM_MATCH_NOR,
  '{"filter":[{"isNested":true,"nestedPath":"regions","nestedProperty":"role","operator":"NOT_EQ","value":"admin"}]}': NO_ELEM_MATCH_NOR,
  '{"filter":[{"isNested":true,"nestedPath":"regions","nestedProperty":"role","operator":"NOT_LIKE","value":"admin"}]}': NO_ELEM_MATCH_NOR,

  'nested EQ string': ELEM_MATCH_OVER_DOCUMENTS,
  'nested EQ uuid': ELEM_MATCH_OVER_DOCUMENTS,
  'nested LIKE': ELEM_MATCH_OVER_DOCUMENTS,
  'nested GT': ELEM_MATCH_OVER_DOCUMENTS,
  'nested GTE': ELEM_MATCH_OVER_DOCUMENTS,
  'nested IN': ELEM_MATCH_OVER_DOCUMENTS,
  'nested IS_NULL: some element lacks it': ELEM_MATCH_OVER_DOCUMENTS,
  'nested boolean EQ true': ELEM_MATCH_OVER_DOCUMENTS,
  'nested boolean EQ false': ELEM_MATCH_OVER_DOCUMENTS,
  'nested array property EQ': ELEM_MATCH_OVER_DOCUMENTS,
  'field and nested conditions together': ELEM_MATCH_OVER_DOCUMENTS,
  '{"filter":[{"isNested":true,"nestedPath":"regions","nestedProperty":"role","operator":"EQ","value":"admin"}]}':
    ELEM_MATCH_OVER_DOCUMENTS,
  '{"filter":[{"isNested":true,"nestedPath":"regions","nestedProperty":"role","operator":"LIKE","value":"admin"}]}':
    ELEM_MATCH_OVER_DOCUMENTS,
  '{"filter":[{"isNested":true,"nestedPath":"regions","nestedProperty":"role","operator":"IS_NOT_NULL","value":"admin"}]}':
    ELEM_MATCH_OVER_DOCUMENTS,

  // The read-model jobs with their generations, leases and checkpoints in FerretDB
  // (readModelJobs.int.spec.ts): these depend on the timing of generation polls, swaps and restarts,
  // and failed in some runs here and passed in others (a search answering READ_MODEL.LAGGING during a
  // swap, a resumed rebuild not finished within the test's ticks, a swap not failing). The cause is
  // not established, so it is not called FerretDB's: they are listed as not run here, not as passing.
  'one instance answers every search in full while a recreate swaps generations': { notRun: UNSTEADY },
  'a generations poll that read before a rebuild reserved its generation does not undo the reservation (the swap then fails)': {
    notRun: UNSTEADY,
  },
  'a client cannot end a service job (409), so a pending DELETE-rebuild is not stranded: a restart finishes it': { notRun: UNSTEADY },
  'a DELETE of the jobs read model whose runner died is resumed after a restart (the scheduler reads its due items from that very model)': {
    notRun: UNSTEADY,
  },
  // The registries' routes over a service whose read models are in FerretDB (registryContract).
  'lists, searches, pages, counts and autocompletes from the read model': {
    differs: 'autocomplete answers 500 (no $concatArrays, as above)',
  },
};

function ferretdbPeer(): MongoPeer | { name: string; reason: string } {
  const url = inject('ferretdbUrl');
  const source = inject('ferretdbSource');
  if (url === undefined) return { name: 'FerretDB', reason: source };
  return {
    name: source,
    kind: 'ferretdb',
    start: () => Promise.resolve(url),
    stop: () => Promise.resolve(),
    limits: { peer: 'FerretDB', tests: FERRETDB_LIMITS },
  };
}

function mongodbPeer(): MongoPeer | { name: string; reason: string } {
  const plan = planTarget('MONGODB_URL');
  const none: PeerLimits = { peer: 'MongoDB', tests: {} };
  switch (plan.kind) {
    case 'skip':
      return { name: 'MongoDB', reason: plan.reason };
    case 'url':
      return {
        name: 'MongoDB at MONGODB_URL',
        kind: 'mongodb',
        start: () => Promise.resolve(plan.url),
        stop: () => Promise.resolve(),
        limits: none,
      };
    case 'container': {
      let container: StartedMongoDBContainer | undefined;
      return {
        name: `MongoDB (testcontainers, ${IMAGES.mongodb})`,
        kind: 'mongodb',
        start: async () => {
          container = await new MongoDBContainer(IMAGES.mongodb).start();
          return direct(container.getConnectionString());
        },
        stop: async () => {
          await container?.stop();
        },
        limits: none,
      };
    }
    default: {
      const _never: never = plan;
      return _never;
    }
  }
}

/** Every MongoDB peer of this run, each either ready to start or missing with the reason. */
export const mongoPeers = (): (MongoPeer | { name: string; reason: string })[] => [ferretdbPeer(), mongodbPeer()];

/**
 * Declares `suite` once per peer; a missing peer gets a skipped suite naming why. `suite` runs
 * inside the peer's describe with a function that answers its URL once started (in beforeAll).
 */
export function eachMongoPeer(title: string, suite: (peer: MongoPeer, url: () => string) => void): void {
  for (const peer of mongoPeers()) {
    if (!('kind' in peer)) {
      describe.skip(`${title} on ${peer.name} (skipped: ${peer.reason})`, () => {
        it(`runs where ${peer.name} is available`, () => undefined);
      });
      continue;
    }
    describe(`${title} on ${peer.name}`, () => {
      let url: string | undefined;
      beforeAllStart(peer, (started) => (url = started));
      suite(peer, () => {
        if (url === undefined) throw new Error(`${peer.name} did not start`);
        return url;
      });
    });
  }
}

/** eachMongoPeer, with a URL naming a database of the suite's own (`<prefix>_<random>`), dropped
 * after the suite. */
export function eachMongoDatabase(title: string, prefix: string, suite: (peer: MongoPeer, url: () => string) => void): void {
  eachMongoPeer(title, (peer, url) => {
    const dbName = `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    afterAll(async () => {
      const client = new MongoClient(url());
      try {
        await client.db(dbName).dropDatabase();
      } finally {
        await client.close();
      }
    });
    suite(peer, () => withDatabase(url(), dbName));
  });
}

function beforeAllStart(peer: MongoPeer, started: (url: string) => void): void {
  beforeAll(async () => {
    started(await peer.start());
  }, 240_000);
  afterAll(async () => {
    await peer.stop();
  }, 60_000);
}

/** The URL naming a database in its path (before any options). */
export const withDatabase = (url: string, dbName: string): string => {
  const [base = '', options] = url.split('?', 2);
  return `${base.replace(/\/?$/, '/')}${dbName}${options === undefined ? '' : `?${options}`}`;
};

/** The URL with more connection-string options. */
export const withOptions = (url: string, options: string): string =>
  `${url}${url.includes('?') ? '&' : url.endsWith('/') ? '?' : '/?'}${options}`;

/** A client that records what it sends: each command, and the read preference each operation
 * selected its server with (the driver's server-selection log; against a single server every read
 * preference reaches it, so only the log tells which one was asked for). */
export function watchedClient(url: string) {
  const commands: CommandStartedEvent[] = [];
  const selections: { operation: string; mode: string }[] = [];
  const client = new MongoClient(url, {
    monitorCommands: true,
    mongodbLogComponentSeverities: { serverSelection: 'debug' },
    mongodbLogPath: {
      write: (log: BsonDocument) => {
        const selector: unknown = log.selector;
        if (typeof selector !== 'string' || !selector.startsWith('{') || log.message !== 'Server selection started') return;
        selections.push({ operation: String(log.operation), mode: String((JSON.parse(selector) as { mode?: unknown }).mode) });
      },
    },
  });
  client.on('commandStarted', (event) => commands.push(event));
  /** What `work` sent: its commands (but the driver's own) and its server selections. */
  const during = async (work: () => Promise<unknown>) => {
    commands.length = 0;
    selections.length = 0;
    await work();
    return { commands: commands.filter((c) => !['hello', 'ismaster', 'endSessions'].includes(c.commandName)), selections: [...selections] };
  };
  return { client, during };
}
