// Shared by the benchmark's load driver and its server process: the raw baselines use the event
// log's own table, indexes and pragmas, so they pay for what the store pays for.

export { EVENT_LOG_PRAGMAS as LOG_PRAGMAS, EVENT_LOG_SCHEMA as RAW_SCHEMA } from '../infra/sqlite/eventStore.ts';
