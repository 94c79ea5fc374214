// The embedded event log's writer thread (see eventLogWriter.ts): its own connection to the file
// named in workerData, the requests of eventStore.ts one at a time, in the order they were sent.

import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';
import { EVENT_LOG_PRAGMAS } from './eventStore.ts';
import { EventLogWriter, type WriterAnswer, type WriterRequest } from './eventLogWriter.ts';

const db = new DatabaseSync((workerData as { path: string }).path);
db.exec(EVENT_LOG_PRAGMAS);
const writer = new EventLogWriter(db);

function answer(request: WriterRequest): WriterAnswer {
  try {
    switch (request.kind) {
      case 'append':
        return { id: request.id, outcomes: writer.appendAll(request.appends) };
      case 'purge':
        return { id: request.id, removed: writer.purge(request.streams) };
      case 'close':
        writer.close();
        return { id: request.id, removed: 0 };
    }
  } catch (error) {
    return { id: request.id, failed: error instanceof Error ? error.message : String(error) };
  }
}

parentPort?.on('message', (request: WriterRequest) => {
  parentPort?.postMessage(answer(request));
  if (request.kind === 'close') parentPort?.close();
});
