// The embedded event log's writer thread (see eventLogWriter.ts): its own connection to the file
// named in workerData, the requests of eventStore.ts one at a time, in the order they were sent.

import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { EVENT_LOG_PRAGMAS } from './eventStore.ts';
import { answerOf, EventLogWriter, type WriterRequest } from './eventLogWriter.ts';

const db = new DatabaseSync((workerData as { path: string }).path);
db.exec(EVENT_LOG_PRAGMAS);
const writer = new EventLogWriter(db);

parentPort?.on('message', (request: WriterRequest) => {
  parentPort?.postMessage(answerOf(writer, request));
  if (request.kind === 'close') parentPort?.close();
});
