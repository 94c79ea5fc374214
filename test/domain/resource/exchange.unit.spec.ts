// The diff of the shared operation set (domain/resource/exchange.ts): matching, what counts as a
// change, uniqueness of the compare field, and the keys of an entry's application.

import { describe, expect, it } from 'vitest';
import { userGroup } from '../../../modules/identity/domain/userGroup.ts';
import { worklogType } from '../../../modules/registries/domain/worklogType.ts';
import {
  checkCompareField,
  comparable,
  diffAgainst,
  entryKey,
  indexIncoming,
  parseExportObject,
  type DiffEntry,
} from '../../../domain/resource/exchange.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';

const audit = (version: number) => ({
  version,
  whoInserted: 'a',
  whenInserted: '2026-01-01T00:00:00.000Z',
  whoEdited: 'b',
  whenEdited: '2026-01-02T00:00:00.000Z',
});
const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const rec = (n: number, name: string, version = 0): JsonObject => ({ id: id(n), code: `C${String(n)}`, name, auditInfo: audit(version) });

/** The records here as the HTTP layer gives them: an async iterable (a keyset scan). */
async function* here(...records: JsonObject[]): AsyncGenerator<JsonObject> {
  for (const record of records) yield await Promise.resolve(record);
}

const kinds = (entries: DiffEntry[]) => entries.map((e) => `${e.diffType}:${String((e.right ?? e.left)?.code)}`);

describe('diffAgainst', () => {
  it('lists changes and removals in the order here, then new records in the incoming order; audit fields never differ', async () => {
    const incoming = [rec(5, 'five'), rec(1, 'one', 7), rec(2, 'two (changed)'), rec(4, 'four')];
    const entries = await diffAgainst(
      worklogType,
      indexIncoming(incoming, 'id'),
      here(rec(1, 'one'), rec(2, 'two'), rec(3, 'three')),
      'id',
    );
    expect(kinds(entries)).toEqual(['DIFF_TYPE_CHANGE:C2', 'DIFF_TYPE_REMOVE:C3', 'DIFF_TYPE_NEW:C5', 'DIFF_TYPE_NEW:C4']);
    expect(entries[0]).toMatchObject({ left: { name: 'two' }, right: { name: 'two (changed)' } });
  });

  it('ignores ids when matching by another field, and compares them when matching by id', async () => {
    const foreign = { ...rec(1, 'one'), id: id(99) };
    expect(await diffAgainst(worklogType, indexIncoming([foreign], 'code'), here(rec(1, 'one')), 'code')).toEqual([]);
    expect(kinds(await diffAgainst(worklogType, indexIncoming([foreign], 'id'), here(rec(1, 'one')), 'id'))).toEqual([
      'DIFF_TYPE_REMOVE:C1',
      'DIFF_TYPE_NEW:C1',
    ]);
  });

  it('refuses a compare field that repeats or is missing, on either side', async () => {
    expect(() => indexIncoming([rec(1, 'same'), rec(2, 'same')], 'name')).toThrow(DomainError);
    expect(() => indexIncoming([{ code: 'X' }], 'id')).toThrow(/does not identify one record/);
    await expect(diffAgainst(worklogType, indexIncoming([], 'name'), here(rec(1, 'same'), rec(2, 'same')), 'name')).rejects.toThrow(/here/);
  });
});

describe('checkCompareField', () => {
  it('takes id, code and single-valued fields of the record; refuses audit fields, arrays, maps and unknown ones', () => {
    expect(checkCompareField(worklogType, 'id')).toBe('id');
    expect(checkCompareField(worklogType, 'code')).toBe('code');
    expect(checkCompareField(userGroup, 'ldapMemberOf')).toBe('ldapMemberOf');
    for (const field of ['auditInfo.version', 'dataTags', 'chars', 'nope'])
      expect(() => checkCompareField(userGroup, field), field).toThrow(DomainError);
  });
});

describe('entryKey', () => {
  const entry: DiffEntry = { diffType: 'DIFF_TYPE_CHANGE', left: rec(1, 'one'), right: rec(1, 'uno') };
  it('is the same for the same entry over the same version, whatever its audit fields', () => {
    const again: DiffEntry = { ...entry, right: { ...rec(1, 'uno'), auditInfo: audit(9) } };
    expect(entryKey(worklogType, 'id', entry, id(1), 3)).toBe(entryKey(worklogType, 'id', again, id(1), 3));
  });
  it('differs with the version it changes, the record it names and the resource', () => {
    const key = entryKey(worklogType, 'id', entry, id(1), 3);
    expect(entryKey(worklogType, 'id', entry, id(1), 4)).not.toBe(key);
    expect(entryKey(worklogType, 'id', { diffType: 'DIFF_TYPE_REMOVE', left: rec(2, 'x') }, id(2), 3)).not.toBe(
      entryKey(worklogType, 'id', { diffType: 'DIFF_TYPE_REMOVE', left: rec(3, 'x') }, id(3), 3),
    );
    expect(entryKey(userGroup, 'id', entry, id(1), 3)).not.toBe(key);
  });
});

describe('parseExportObject', () => {
  it('names what is missing or which entry fails the schema', () => {
    expect(() => parseExportObject(worklogType, [])).toThrow(/not an export object/);
    expect(() => parseExportObject(worklogType, { filtering: [] })).toThrow(DomainError);
    try {
      parseExportObject(worklogType, { filtering: [], data: [{ code: 'A', name: 'a' }, { code: 'B' }] });
      expect.unreachable();
    } catch (error) {
      expect((error as DomainError).errors).toEqual([expect.stringMatching(/^data\[1\]\.name: /)]);
    }
  });
  it('compares records without their audit fields', () => {
    expect(comparable(worklogType, rec(1, 'one', 5), 'code')).toEqual({ code: 'C1', name: 'one' });
  });
});
