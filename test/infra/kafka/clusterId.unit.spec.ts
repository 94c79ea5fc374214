// The KRaft cluster id the broker script formats its storage with: never an argument the format
// tool takes for an option.

import { describe, expect, it } from 'vitest';
import { kafkaClusterId } from '../../../scripts/kafka.ts';

describe('kafkaClusterId', () => {
  it('never starts with "-", even from bytes whose base64url would (a format that failed 1 run in 64)', () => {
    const dashFirst = Buffer.alloc(16, 0xf8);
    expect(dashFirst.toString('base64url').startsWith('-')).toBe(true);
    const id = kafkaClusterId(dashFirst);
    expect(id.startsWith('-')).toBe(false);
    expect(Buffer.from(id, 'base64url')).toHaveLength(16);
    for (let i = 0; i < 1000; i++) expect(kafkaClusterId()).toMatch(/^[A-Za-f][A-Za-z0-9_-]{21}$/);
  });
});
