// docs/events.md is what auditors and Kafka consumers read to know what each event means: it must
// say what the code declares, so it is written from the declarations and held equal to them here.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { eventCatalogue } from '../../api/eventCatalogue.ts';
import { modules } from '../../modules/index.ts';

describe('the event catalogue', () => {
  it('is docs/events.md as `npm run docs:events` writes it', () => {
    expect(readFileSync('docs/events.md', 'utf8'), 'docs/events.md differs from the declarations: run npm run docs:events').toBe(eventCatalogue(modules).text);
  });

  it('lists every event type of every resource served under its stored name, and the names stored in the log before', () => {
    const { text } = eventCatalogue(modules);
    for (const type of ['NotificationStateChanged', 'NotificationTriggered', 'JobRetried', 'JobStepRetried', 'UserPasswordChanged', 'LogDeletionCreated', 'LogDeletionPurged', 'UserGroupCreated']) {
      expect(text).toContain(`| \`${type}\` |`);
    }
    const declared = modules.flatMap((m) => m.resources ?? []).flatMap((r) => Object.keys(r.definition.events));
    for (const type of declared) expect(text).toContain(`| \`${type}\` |`);
  });
});
