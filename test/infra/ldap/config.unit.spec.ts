// The directory's settings are checked once at start: a setting that would make every login fail
// (or bind without a password) stops the service with its name, instead of surfacing at a login.

import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../infra/config.ts';
import { ldapSettingsOf } from '../../../infra/ldap/ldapDirectory.ts';

const load = (env: Record<string, string>) => loadConfig(env, '/nonexistent/.env');
const problems = (env: Record<string, string>): string => {
  try {
    load(env);
    return '';
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
};

describe('directory configuration', () => {
  it("is off without LDAP_URL, and OpenLDAP's names by default with it", () => {
    expect(ldapSettingsOf(load({}))).toBeUndefined();
    const settings = ldapSettingsOf(load({ LDAP_URL: 'ldaps://ldap.example.org:636', LDAP_USER_BASE: 'ou=people,dc=example,dc=org' }));
    expect(settings).toMatchObject({
      url: 'ldaps://ldap.example.org:636',
      userFilter: '(uid={username})',
      groupFilter: '(member={dn})',
      timeoutMs: 5000,
      sizeLimit: 10_000,
      attributes: { code: 'uid', familyName: 'sn', memberOf: 'memberOf' },
    });
    expect(settings?.bind).toBeUndefined();
  });

  it("takes Active Directory's names", () => {
    const settings = ldapSettingsOf(
      load({
        LDAP_URL: 'ldap://dc1.corp.example.org',
        LDAP_USER_BASE: 'DC=corp,DC=example,DC=org',
        LDAP_USER_FILTER: '(&(objectClass=user)(sAMAccountName={username}))',
        LDAP_ATTRIBUTES: 'code=sAMAccountName',
        LDAP_BIND_DN: 'CN=svc,DC=corp',
        LDAP_BIND_PASSWORD: 's3cret',
      }),
    );
    expect(settings).toMatchObject({
      attributes: { code: 'sAMAccountName', givenName: 'givenName' },
      bind: { dn: 'CN=svc,DC=corp', password: 's3cret' },
    });
  });

  it('refuses settings that cannot work, naming each', () => {
    const message = problems({
      LDAP_URL: 'ldaps://ldap.example.org',
      LDAP_STARTTLS: 'true',
      LDAP_USER_FILTER: 'uid=x',
      LDAP_GROUP_FILTER: '(member=x)',
      LDAP_BIND_DN: 'cn=svc',
      LDAP_ATTRIBUTES: 'login=uid',
      LDAP_CA_FILE: '/nonexistent/ca.pem',
    });
    for (const expected of [
      'LDAP_USER_FILTER is not one parenthesised LDAP filter',
      'LDAP_USER_FILTER must hold {username}',
      'LDAP_GROUP_FILTER must hold {dn}',
      'LDAP_USER_BASE is required with LDAP_URL',
      'LDAP_BIND_DN needs LDAP_BIND_PASSWORD',
      'LDAP_STARTTLS is for ldap:// URLs',
      'LDAP_CA_FILE /nonexistent/ca.pem does not exist',
      'LDAP_ATTRIBUTES: "login" is not one of',
    ])
      expect(message).toContain(expected);
    expect(problems({ LDAP_URL: 'ldap://ldap.example.org', LDAP_USER_BASE: 'dc=example', LDAP_CA_FILE: '/etc/hostname' })).toContain(
      'LDAP_CA_FILE checks a TLS connection: use an ldaps:// LDAP_URL or LDAP_STARTTLS=true',
    );
    expect(problems({ LDAP_URL: 'http://ldap.example.org' })).toContain('LDAP_URL is ldap://host[:port] or ldaps://host[:port]');
  });
});
