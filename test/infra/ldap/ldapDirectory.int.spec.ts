// The LDAP adapter against a real OpenLDAP (slapd, seeded by scripts/openldap.ts): binds as the
// person with the password given, maps attributes and groups, and keeps its security limits: a
// login name is data (RFC 4515), an empty password is never sent (this slapd would take it as an
// anonymous bind), every exchange is bounded in time and in size.

import { createServer, type Server, type Socket } from 'node:net';
import { Client } from 'ldapts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ldapDirectory } from '../../../infra/ldap/ldapDirectory.ts';
import { isDomainError } from '../../../domain/shared/errors.ts';
import { BASE_DN, adSettings, ldapUrl, openLdapSettings, titled } from '../../support/openldap.ts';

const group = (cn: string) => `cn=${cn},ou=groups,${BASE_DN}`;

/** The error code a promise rejects with. */
const codeOf = (promise: Promise<unknown>): Promise<string> =>
  promise.then(
    () => 'resolved',
    (error: unknown) => (isDomainError(error) ? error.code : String(error)),
  );

describe.skipIf(ldapUrl() === undefined)(titled('LDAP directory adapter on OpenLDAP'), () => {
  it('binds as the person and answers their fields and memberOf groups', async () => {
    const person = await ldapDirectory(openLdapSettings()).authenticate('alice', 'alice-secret');
    expect(person).toEqual({
      dn: `uid=alice,ou=people,${BASE_DN}`,
      code: 'alice',
      givenName: 'Alice',
      familyName: 'Archer',
      email: 'alice@example.org',
      phoneNumber: '+420 601 000 001',
      groups: [group('operators'), group('auditors'), group('everyone')],
    });
  });

  it('answers no one for a wrong password or an unknown name', async () => {
    const directory = ldapDirectory(openLdapSettings());
    expect(await directory.authenticate('alice', 'wrong')).toBeUndefined();
    expect(await directory.authenticate('nobody', 'alice-secret')).toBeUndefined();
  });

  it('never sends an empty password, which this directory takes as an anonymous bind', async () => {
    // The directory itself accepts the bind: only the adapter stands between it and a login.
    const client = new Client({ url: ldapUrl() ?? '' });
    await client.bind(`uid=alice,ou=people,${BASE_DN}`, '');
    await client.unbind();
    expect(await ldapDirectory(openLdapSettings()).authenticate('alice', '')).toBeUndefined();
    expect(
      await ldapDirectory(openLdapSettings({ userDnTemplate: `uid={username},ou=people,${BASE_DN}` })).authenticate('alice', ''),
    ).toBeUndefined();
  });

  it('escapes filter syntax in the login name: it matches only a person of that very name', async () => {
    const directory = ldapDirectory(openLdapSettings());
    // Unescaped, `al*` would find alice alone and her password would log it in.
    expect(await directory.authenticate('al*', 'alice-secret')).toBeUndefined();
    expect(await directory.authenticate('*', 'alice-secret')).toBeUndefined();
    expect(await directory.authenticate('alice)(|(uid=*', 'alice-secret')).toBeUndefined();
    expect(await directory.authenticate('*)(uid=alice', 'alice-secret')).toBeUndefined();
    // A name that holds a `*` is found as written.
    expect((await directory.authenticate('d*ve', 'd*ve-secret'))?.code).toBe('d*ve');
  });

  it('finds the DN by template, the value escaped as RFC 4514 says', async () => {
    const { bind: _service, ...settings } = openLdapSettings({ userDnTemplate: `uid={username},ou=people,${BASE_DN}` });
    const directory = ldapDirectory(settings);
    expect((await directory.authenticate('bob', 'bob-secret'))?.groups).toEqual([group('auditors'), group('everyone')]);
    expect(await directory.authenticate('bob,ou=people', 'bob-secret')).toBeUndefined();
  });

  it("reads Active Directory's attribute names", async () => {
    const person = await ldapDirectory(adSettings()).authenticate('ddane', 'ddane-secret');
    expect(person).toMatchObject({
      code: 'ddane',
      givenName: 'Dana',
      familyName: 'Dane',
      email: 'dana.dane@corp.example.org',
      groups: [group('ad-admins')],
    });
    const byPrincipal = ldapDirectory(adSettings({ userFilter: '(userPrincipalName={username})' }));
    expect((await byPrincipal.authenticate('ddane@corp.example.org', 'ddane-secret'))?.code).toBe('ddane');
  });

  it('searches the groups where the entry has no memberOf', async () => {
    const settings = openLdapSettings({
      attributes: { ...openLdapSettings().attributes, memberOf: 'seeAlso' },
      groupBase: `ou=groups,${BASE_DN}`,
    });
    expect((await ldapDirectory(settings).authenticate('bob', 'bob-secret'))?.groups.toSorted()).toEqual([
      group('auditors'),
      group('everyone'),
    ]);
  });

  it('lists every person for the sync, and refuses an answer over the size limit', async () => {
    const people = await ldapDirectory(openLdapSettings()).people();
    expect(people.map((p) => p.code).toSorted()).toEqual(['alice', 'bob', 'carol', 'd*ve']);
    expect(await codeOf(ldapDirectory(openLdapSettings({ sizeLimit: 3 })).people())).toBe('DIRECTORY.ANSWER_TOO_LARGE');
  });

  it('refuses a person with more groups than the size limit, once the password is right', async () => {
    const directory = ldapDirectory(openLdapSettings({ sizeLimit: 2 }));
    expect(await codeOf(directory.authenticate('alice', 'alice-secret'))).toBe('DIRECTORY.ANSWER_TOO_LARGE');
    expect(await directory.authenticate('alice', 'wrong')).toBeUndefined();
  });

  it('answers DIRECTORY.UNAVAILABLE when the service account is refused', async () => {
    expect(
      await codeOf(
        ldapDirectory(openLdapSettings({ bind: { dn: `cn=admin,${BASE_DN}`, password: 'wrong' } })).authenticate('alice', 'alice-secret'),
      ),
    ).toBe('DIRECTORY.UNAVAILABLE');
  });
});

describe('LDAP directory adapter without a directory', () => {
  let silent: Server;
  let silentUrl = '';
  const sockets = new Set<Socket>();
  beforeAll(async () => {
    // Accepts connections and never answers: a directory that hangs.
    silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    silentUrl = `ldap://127.0.0.1:${String(typeof address === 'object' && address !== null ? address.port : 0)}`;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  it('answers DIRECTORY.UNAVAILABLE for a directory that refuses connections', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const address = closed.address();
    await new Promise((resolve) => closed.close(resolve));
    const url = `ldap://127.0.0.1:${String(typeof address === 'object' && address !== null ? address.port : 0)}`;
    const error = await ldapDirectory(openLdapSettings({ url }))
      .authenticate('alice', 'alice-secret')
      .catch((e: unknown) => e);
    expect(isDomainError(error) && [error.code, error.errors]).toEqual([
      'DIRECTORY.UNAVAILABLE',
      ['the directory could not be reached (ECONNREFUSED)'],
    ]);
  });

  it('gives up on a directory that does not answer after LDAP_TIMEOUT_MS', async () => {
    const started = Date.now();
    const error = await ldapDirectory(openLdapSettings({ url: silentUrl, timeoutMs: 300 }))
      .authenticate('alice', 'alice-secret')
      .catch((e: unknown) => e);
    expect(isDomainError(error) && [error.code, error.errors]).toEqual([
      'DIRECTORY.UNAVAILABLE',
      ['no answer within 300 ms (LDAP_TIMEOUT_MS)'],
    ]);
    // Bounded: a hanging directory would otherwise hold the login for ever.
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
