// The pure parts of the directory module: what a login name becomes in a filter or a DN, the
// attribute mapping, and the sync decision from directory entries and the service's users.

import { describe, expect, it } from 'vitest';
import { OPENLDAP_ATTRIBUTES, parseAttributeMapping, personOf } from '../../../modules/directory/domain/attributes.ts';
import {
  escapeDnValue,
  escapeFilterValue,
  everyUserFilter,
  groupFilter,
  isBalancedFilter,
  userFilter,
} from '../../../modules/directory/domain/filter.ts';
import { decideSync, groupCodesOf, type SyncUser } from '../../../modules/directory/domain/sync.ts';

describe('RFC 4515 filter values', () => {
  it('escapes the filter syntax of a login name, so it matches only itself', () => {
    expect(escapeFilterValue('*')).toBe('\\2a');
    expect(escapeFilterValue('a)(uid=*')).toBe('a\\29\\28uid=\\2a');
    expect(escapeFilterValue('back\\slash\u0000')).toBe('back\\5cslash\\00');
    expect(userFilter('(uid={username})', 'al*')).toBe('(uid=al\\2a)');
    expect(userFilter('(&(objectClass=user)(sAMAccountName={username}))', 'x)(|(a=*')).toBe(
      '(&(objectClass=user)(sAMAccountName=x\\29\\28|\\28a=\\2a))',
    );
  });

  it('leaves a plain name and UTF-8 as they are', () => {
    expect(escapeFilterValue('jana.nováková')).toBe('jana.nováková');
  });

  it('fills the group filter with the DN escaped, and the sync filter with a presence', () => {
    expect(groupFilter('(member={dn})', { dn: 'uid=d*ve,ou=people,dc=x', username: 'd*ve' })).toBe('(member=uid=d\\2ave,ou=people,dc=x)');
    expect(everyUserFilter('(&(objectClass=inetOrgPerson)(uid={username}))')).toBe('(&(objectClass=inetOrgPerson)(uid=*))');
  });

  it('tells a balanced filter from one that is not', () => {
    expect(isBalancedFilter('(uid={username})')).toBe(true);
    expect(isBalancedFilter('(&(a=1)(b=\\29))')).toBe(true);
    expect(isBalancedFilter('uid={username}')).toBe(false);
    expect(isBalancedFilter('(a=1))(')).toBe(false);
    expect(isBalancedFilter('(a=1)(b=2)')).toBe(false);
  });
});

describe('RFC 4514 DN values', () => {
  it('escapes what would end or split the RDN', () => {
    expect(escapeDnValue('a,ou=admins')).toBe('a\\,ou\\=admins');
    expect(escapeDnValue(' #x ')).toBe('\\ #x\\ ');
    expect(escapeDnValue('#x')).toBe('\\#x');
    expect(escapeDnValue('a+b"c<d>e;f\\')).toBe('a\\+b\\"c\\<d\\>e\\;f\\\\');
  });
});

describe('attribute mapping (LDAP_ATTRIBUTES)', () => {
  it("defaults to OpenLDAP's names, and a partial mapping keeps the others", () => {
    expect(parseAttributeMapping(undefined)).toEqual({ mapping: OPENLDAP_ATTRIBUTES });
    expect(parseAttributeMapping('code=sAMAccountName, email=userPrincipalName')).toEqual({
      mapping: { ...OPENLDAP_ATTRIBUTES, code: 'sAMAccountName', email: 'userPrincipalName' },
    });
    expect(parseAttributeMapping('{"familyName":"surname"}')).toEqual({ mapping: { ...OPENLDAP_ATTRIBUTES, familyName: 'surname' } });
  });

  it('names what is wrong with a mapping', () => {
    expect(parseAttributeMapping('login=uid,email=')).toEqual({
      problems: ['"login" is not one of code, givenName, familyName, email, phoneNumber, memberOf', 'email: "" is not an attribute name'],
    });
    expect(parseAttributeMapping('{oops')).toEqual({ problems: ['neither field=attribute pairs nor a JSON object'] });
  });

  it('reads an entry through the mapping, attribute names case-insensitively', () => {
    const entry = {
      dn: 'cn=Dana Dane,ou=ad,dc=x',
      attributes: { samaccountname: ['ddane'], givenName: ['Dana'], SN: ['Dane'], mail: [' '], memberOf: ['cn=a,dc=x', 'cn=b,dc=x'] },
    };
    const mapping = { ...OPENLDAP_ATTRIBUTES, code: 'sAMAccountName' };
    expect(personOf(entry, mapping)).toEqual({
      dn: entry.dn,
      code: 'ddane',
      givenName: 'Dana',
      familyName: 'Dane',
      groups: ['cn=a,dc=x', 'cn=b,dc=x'],
    });
    expect(personOf(entry, mapping, ['cn=c,dc=x']).groups).toEqual(['cn=c,dc=x']);
  });
});

describe('the sync decision', () => {
  const groups = [
    { code: 'OPS', ldapMemberOf: 'cn=operators,ou=groups,dc=example,dc=org' },
    { code: 'AUD', ldapMemberOf: 'CN=Auditors, OU=Groups, DC=example, DC=org' },
  ];
  const options = { userType: 'PERSON', authentication: 'LDAP' } as const;
  const alice = {
    dn: 'uid=alice,ou=people,dc=example,dc=org',
    code: 'alice',
    givenName: 'Alice',
    familyName: 'Archer',
    email: 'alice@example.org',
    groups: ['cn=operators,ou=groups,dc=example,dc=org', 'cn=unmapped,dc=example,dc=org'],
  };
  const user = (fields: Record<string, unknown>, id = 'u1'): SyncUser => ({
    id,
    version: 3,
    fields: { type: 'PERSON', status: 'ENABLE', authentication: 'LDAP', ...fields },
  });

  it('maps directory groups to user groups by their normalised DN', () => {
    expect(
      groupCodesOf(['cn=auditors,ou=groups,dc=example,dc=org', 'CN=Operators,OU=groups,DC=example,DC=org', 'cn=none'], groups),
    ).toEqual(['AUD', 'OPS']);
  });

  it('creates a person the service does not have, with the directory-backed groups', () => {
    const decision = decideSync([alice], [], groups, options);
    expect(decision.commands).toEqual([
      {
        type: 'Create',
        code: 'alice',
        input: {
          code: 'alice',
          type: 'PERSON',
          authentication: 'LDAP',
          status: 'ENABLE',
          chars: {},
          givenName: 'Alice',
          familyName: 'Archer',
          email: 'alice@example.org',
          groups: ['OPS'],
        },
      },
    ]);
  });

  it('decides nothing for a user already as the directory has it', () => {
    const same = user({ code: 'alice', givenName: 'Alice', familyName: 'Archer', email: 'alice@example.org', groups: ['LOCAL', 'OPS'] });
    expect(decideSync([alice], [same], groups, options)).toEqual({ commands: [], skipped: [], unchanged: 1 });
  });

  it('updates the mapped fields and the directory-backed groups only, keeping the others', () => {
    const before = user({
      code: 'alice',
      givenName: 'Alicia',
      familyName: 'Archer',
      email: 'alice@example.org',
      phoneNumber: '+420 1',
      groups: ['AUD', 'LOCAL'],
      roles: ['viewer'],
    });
    const [command] = decideSync([alice], [before], groups, options).commands;
    expect(command).toEqual({
      type: 'Update',
      id: 'u1',
      version: 3,
      code: 'alice',
      changed: ['givenName', 'phoneNumber', 'groups'],
      input: {
        type: 'PERSON',
        status: 'ENABLE',
        authentication: 'LDAP',
        code: 'alice',
        givenName: 'Alice',
        familyName: 'Archer',
        email: 'alice@example.org',
        groups: ['LOCAL', 'OPS'],
        roles: ['viewer'],
      },
    });
  });

  it('disables an enabled directory user that left the directory, and no other', () => {
    const gone = user({ code: 'gone' }, 'u2');
    const goneDisabled = user({ code: 'gone2', status: 'DISABLE' }, 'u3');
    const local = user({ code: 'local', authentication: 'PASSWORD' }, 'u4');
    const decision = decideSync([], [gone, goneDisabled, local], groups, options);
    expect(decision.commands).toEqual([
      { type: 'Disable', id: 'u2', version: 3, code: 'gone', input: { ...gone.fields, status: 'DISABLE' } },
    ]);
  });

  it('never takes over a local account, and skips codes it cannot use', () => {
    const local = user({ code: 'alice', authentication: 'PASSWORD' });
    const people = [
      alice,
      { dn: 'cn=x', groups: [] },
      { dn: 'cn=y', code: 'has space', groups: [] },
      { dn: 'cn=t1', code: 'twin', groups: [] },
      { dn: 'cn=t2', code: 'twin', groups: [] },
    ];
    const twin = user({ code: 'twin' }, 'u9');
    const decision = decideSync(people, [local, twin], groups, options);
    expect(decision.commands).toEqual([]);
    expect(decision.skipped.map((s) => [s.dn, s.reason])).toEqual([
      ['cn=x', 'the entry has no value for the code attribute'],
      ['cn=y', 'not a user code (printable ASCII without spaces, at most 255)'],
      ['cn=t1', 'several directory entries have this code'],
      ['cn=t2', 'several directory entries have this code'],
      [alice.dn, 'a user of authentication PASSWORD has this code: the sync leaves it'],
    ]);
  });

  it('names a person without given or family name by the code', () => {
    const [command] = decideSync([{ dn: 'cn=svc', code: 'svc', groups: [] }], [], groups, options).commands;
    expect(command?.type === 'Create' ? command.input.name : undefined).toBe('svc');
  });
});
