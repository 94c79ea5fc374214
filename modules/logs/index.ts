// Logs: operation logs, the fastest-growing resource: their own create and read routes, their read
// model, "delete old logs" and the retention pass that purges deleted logs' events.
export { logsModule } from './api/logs.ts';
