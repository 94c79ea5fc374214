// kafkajs 2.2.4 (its last release) arms a timer from each broker connection's request queue every
// time it checks its pending requests, even with none pending and no throttle: the delay is
// `throttledUntil` (-1 until a broker throttles) minus Date.now(), a negative number that Node 24
// warns about (TimeoutNegativeWarning) and runs after 1 ms, and the check it runs arms the next
// one. So every open connection woke the process every millisecond or so for as long as it was
// open, on a shared machine too (https://github.com/tulios/kafkajs/issues/1751, unfixed there).
// Here the check is armed only when it has something to do: requests pending (when the throttle
// ends, else after kafkajs's own 10 ms) or a throttle to wait out; a request queued while none can
// be sent arms it again (push), and a fulfilled one checks at once (fulfillRequest).
// Imported for its effect by the kafkajs client (client.ts), before any connection exists.

import { createRequire } from 'node:module';

/** The part of kafkajs's RequestQueue this patch reads and replaces. */
type RequestQueue = {
  pending: unknown[];
  throttledUntil: number;
  throttleCheckTimeoutId: NodeJS.Timeout | null;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
};

/** kafkajs's interval between checks of requests that wait with no throttle (CHECK_PENDING_REQUESTS_INTERVAL). */
const CHECK_PENDING_MS = 10;

const RequestQueueClass = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js') as { prototype: RequestQueue };

RequestQueueClass.prototype.scheduleCheckPendingRequests = function scheduleCheckPendingRequests(this: RequestQueue): void {
  if (this.throttleCheckTimeoutId !== null) return;
  const untilUnthrottled = this.throttledUntil - Date.now();
  if (this.pending.length === 0 && untilUnthrottled <= 0) return;
  const delay = untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_MS;
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, delay);
};
