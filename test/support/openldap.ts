// The test run's OpenLDAP (test/support/openldap.globalSetup.ts) and directory settings over it:
// OpenLDAP's names by default, Active Directory's where a test says so.

import { inject } from 'vitest';
import { OPENLDAP_ATTRIBUTES } from '../../modules/directory/domain/attributes.ts';
import type { LdapSettings } from '../../infra/ldap/ldapDirectory.ts';
import { ADMIN_DN, ADMIN_PASSWORD, BASE_DN } from '../../scripts/openldap.ts';

export { ADMIN_DN, ADMIN_PASSWORD, BASE_DN };

/** The run's slapd, or undefined with the reason the suites skip. */
export const ldapUrl = (): string | undefined => inject('ldapUrl');
export const ldapSkipReason = (): string => inject('ldapSource');

/** A suite's title, saying why it is skipped where there is no slapd. */
export const titled = (title: string): string => (ldapUrl() === undefined ? `${title} (skipped: ${ldapSkipReason()})` : title);

/** Settings for the seeded tree as a deployment on OpenLDAP would have them. */
export function openLdapSettings(overrides: Partial<LdapSettings> = {}): LdapSettings {
  return {
    url: ldapUrl() ?? 'ldap://127.0.0.1:1',
    startTls: false,
    bind: { dn: ADMIN_DN, password: ADMIN_PASSWORD },
    userBase: `ou=people,${BASE_DN}`,
    userFilter: '(&(objectClass=inetOrgPerson)(uid={username}))',
    groupFilter: '(member={dn})',
    attributes: OPENLDAP_ATTRIBUTES,
    timeoutMs: 5000,
    sizeLimit: 1000,
    ...overrides,
  };
}

/** The same tree's Active Directory-like branch, read with Active Directory's attribute names. */
export function adSettings(overrides: Partial<LdapSettings> = {}): LdapSettings {
  return openLdapSettings({
    userBase: `ou=ad,${BASE_DN}`,
    userFilter: '(sAMAccountName={username})',
    attributes: { ...OPENLDAP_ATTRIBUTES, code: 'sAMAccountName' },
    ...overrides,
  });
}
