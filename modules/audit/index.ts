// Audit: a record's history and any past version of it, the log read as a feed (pages, live
// text/event-stream) for auditors and for consumers that replay it.
export { auditModule } from './api/audit.ts';
