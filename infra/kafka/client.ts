// The kafkajs client both Kafka adapters share: kafkajs's own log lines go to the service's logger
// (errors, and warnings when it has `warn`), or nowhere when none is given, so tests stay quiet.

import { Kafka, logLevel, type LogEntry } from 'kafkajs';
// kafkajs's request queues, armed only when they have something to check (see the file).
import './requestQueue.ts';

export type KafkaLogger = { error(obj: object, msg: string): void; warn?(obj: object, msg: string): void };

export type KafkaClientOptions = { brokers: readonly string[]; clientId: string; logger?: KafkaLogger | undefined };

export function createKafka(options: KafkaClientOptions): Kafka {
  const logger = options.logger;
  if (logger === undefined) return new Kafka({ clientId: options.clientId, brokers: [...options.brokers], logLevel: logLevel.NOTHING });
  return new Kafka({
    clientId: options.clientId,
    brokers: [...options.brokers],
    logLevel: logger.warn === undefined ? logLevel.ERROR : logLevel.WARN,
    logCreator: () => (entry: LogEntry) => {
      const { message, timestamp: _timestamp, ...extra } = entry.log;
      // The root logger's entries have no namespace, whatever the types say.
      const namespace = entry.namespace as string | undefined;
      const line = `kafkajs${namespace === undefined || namespace === '' ? '' : ` ${namespace}`}: ${message}`;
      if (entry.level === logLevel.ERROR) logger.error(extra, line);
      else if (entry.level === logLevel.WARN) logger.warn?.(extra, line);
    },
  });
}

/** kafkajs header values are a Buffer, a string or an array of them: the first one, as UTF-8. */
export function headerText(value: Buffer | string | readonly (Buffer | string)[] | undefined): string | undefined {
  const first = Array.isArray(value) ? (value as readonly (Buffer | string)[])[0] : (value as Buffer | string | undefined);
  if (first === undefined) return undefined;
  return typeof first === 'string' ? first : first.toString('utf8');
}
