// The directory over TLS against a real OpenLDAP: a slapd of this suite's own (scripts/openldap.ts
// with a server certificate from a throwaway CA made with openssl) listens on ldaps:// and offers
// StartTLS on ldap://. A login's password travels in the bind, so the service must speak TLS when
// told to and must refuse a directory whose certificate it cannot check: never fall back to plain
// text, never send the bind to an unverified server.

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDomainError } from '../../../domain/shared/errors.ts';
import { loadConfig } from '../../../infra/config.ts';
import { ldapDirectory, ldapSettingsOf, type LdapSettings } from '../../../infra/ldap/ldapDirectory.ts';
import { findSlapd, startOpenLdap, type RunningOpenLdap } from '../../../scripts/openldap.ts';
import { BASE_DN, ADMIN_DN, ADMIN_PASSWORD, openLdapSettings } from '../../support/openldap.ts';
import { makePki, opensslMissing, type Pki } from '../../support/pki.ts';

const slapd = findSlapd();
const missing = 'missing' in slapd ? slapd.missing : opensslMissing();

/** The error code a promise rejects with, or what it resolved to. */
const outcome = (promise: Promise<unknown>): Promise<string> =>
  promise.then(
    (person) => (person === undefined ? 'no one' : 'logged in'),
    (error: unknown) => (isDomainError(error) ? `${error.code}: ${error.errors.join('; ')}` : String(error)),
  );

describe.skipIf(missing !== undefined)(`LDAP over TLS on OpenLDAP${missing === undefined ? '' : ` (skipped: ${missing})`}`, () => {
  let pki: Pki;
  let running: RunningOpenLdap;
  const ldaps = (): string => running.ldapsUrl ?? 'ldaps:// (not started)';
  const settings = (overrides: Partial<LdapSettings>): LdapSettings => openLdapSettings({ url: running.url, ...overrides });

  beforeAll(async () => {
    pki = makePki();
    running = await startOpenLdap((slapd as { slapd: string }).slapd, undefined, {
      cert: pki.files.serverCert,
      key: pki.files.serverKey,
      ca: pki.files.ca,
    });
  });
  afterAll(async () => {
    await running.stop();
    pki.remove();
  });

  it('logs in over ldaps:// with the CA of LDAP_CA_FILE', async () => {
    const directory = ldapDirectory(settings({ url: ldaps(), ca: pki.caPem }));
    expect(await outcome(directory.authenticate('alice', 'alice-secret'))).toBe('logged in');
    expect(await outcome(directory.authenticate('alice', 'wrong'))).toBe('no one');
  });

  it('logs in over ldap:// upgraded with StartTLS', async () => {
    const directory = ldapDirectory(settings({ startTls: true, ca: pki.caPem }));
    expect(await outcome(directory.authenticate('alice', 'alice-secret'))).toBe('logged in');
    expect((await directory.people()).map((p) => p.code).sort()).toEqual(['alice', 'bob', 'carol', 'd*ve']);
  });

  it('refuses a directory whose certificate does not chain to the trusted CAs: 503, the bind never sent', async () => {
    // Node's bundled CAs (no LDAP_CA_FILE) do not know this CA; nor does another CA.
    for (const ca of [undefined, pki.files.otherCa]) {
      const trusted = ca === undefined ? {} : { ca: readFileSync(ca, 'utf8') };
      for (const over of [{ url: ldaps() }, { startTls: true }]) {
        const found = await outcome(ldapDirectory(settings({ ...over, ...trusted })).authenticate('alice', 'alice-secret'));
        expect(found, JSON.stringify({ ca, over })).toMatch(/^DIRECTORY\.UNAVAILABLE: /);
      }
    }
  });

  it('takes LDAP_URL=ldaps://, LDAP_STARTTLS and LDAP_CA_FILE from the configuration as they are documented', async () => {
    const env = {
      LDAP_USER_BASE: `ou=people,${BASE_DN}`,
      LDAP_BIND_DN: ADMIN_DN,
      LDAP_BIND_PASSWORD: ADMIN_PASSWORD,
      LDAP_CA_FILE: pki.files.ca,
    };
    for (const extra of [{ LDAP_URL: ldaps() }, { LDAP_URL: running.url, LDAP_STARTTLS: 'true' }]) {
      const configured = ldapSettingsOf(loadConfig({ ...env, ...extra }, '/nonexistent/.env'));
      expect(configured).toBeDefined();
      expect(await outcome(ldapDirectory(configured as LdapSettings).authenticate('bob', 'bob-secret'))).toBe('logged in');
    }
  });
});
