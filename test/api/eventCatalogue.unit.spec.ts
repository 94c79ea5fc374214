// docs/events.md is what auditors and Kafka consumers read to know what each event means: it must
// say what the code declares, so it is written from the declarations (`npm run docs`), and
// test/domain/shared/generatedDocs.unit.spec.ts holds the committed file equal to them.

import { describe, expect, it } from 'vitest';
import { eventCatalogue } from '../../api/eventCatalogue.ts';
import { modules } from '../../modules/index.ts';

describe('the event catalogue', () => {
  it('lists every event type of every resource served under its stored name, and the names stored in the log before', () => {
    const { text } = eventCatalogue(modules);
    for (const type of [
      'NotificationStateChanged',
      'NotificationTriggered',
      'JobRetried',
      'JobStepRetried',
      'UserPasswordChanged',
      'LogDeletionCreated',
      'LogDeletionPurged',
      'UserGroupCreated',
    ]) {
      expect(text).toContain(`| \`${type}\` |`);
    }
    const declared = modules.flatMap((m) => m.resources ?? []).flatMap((r) => Object.keys(r.definition.events));
    for (const type of declared) expect(text).toContain(`| \`${type}\` |`);
  });
});
