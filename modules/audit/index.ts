// Audit: a record's history and any past version of it, the log read as a feed (pages, live
// text/event-stream) for auditors and for consumers that replay it.

import type { Module } from '../../api/module.ts';
import { auditRoutes } from './api/audit.ts';

export const auditModule: Module = { name: 'audit', routes: auditRoutes };
