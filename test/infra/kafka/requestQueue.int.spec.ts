// A connected kafkajs client with nothing to send arms no timer (infra/kafka/requestQueue.ts):
// kafkajs 2.2.4 re-armed a 1 ms one from each connection's request queue for as long as it was
// open (TimeoutNegativeWarning on Node 24). Counted by which code creates each timer, not by time.

import { createHook } from 'node:async_hooks';
import { expect, it } from 'vitest';
import { createKafka } from '../../../infra/kafka/client.ts';
import { describeKafka, requireKafkaBrokers } from '../../support/kafka.ts';

/** The timers a request queue arms (scheduleCheckPendingRequests, kafkajs's or ours) while `work` runs. */
async function requestQueueTimers(work: () => Promise<void>): Promise<number> {
  let created = 0;
  const hook = createHook({
    init: (_id, type) => {
      if (type === 'Timeout' && new Error().stack?.includes('scheduleCheckPendingRequests') === true) created += 1;
    },
  });
  hook.enable();
  try {
    await work();
  } finally {
    hook.disable();
  }
  return created;
}

describeKafka('kafkajs request queues', () => {
  it('an idle connection arms no timer, and answers the next request', async () => {
    const admin = createKafka({ brokers: requireKafkaBrokers(), clientId: 'request-queue' }).admin();
    await admin.connect();
    try {
      // Requests answered (each answer checks the queue), then nothing to send for a while.
      expect((await admin.describeCluster()).brokers.length).toBeGreaterThan(0);
      const idle = await requestQueueTimers(() => new Promise((resolve) => setTimeout(resolve, 200)));
      expect(idle).toBe(0);
      expect((await admin.describeCluster()).brokers.length).toBeGreaterThan(0);
    } finally {
      await admin.disconnect();
    }
  });
});
