// The TLS listener's configuration is checked at start: the variables go together, and each file is
// read and parsed, a wrong one named by its variable (real files made by openssl).

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../infra/config.ts';
import { tlsServerOptions } from '../../infra/tls.ts';
import { makePki, opensslMissing, type Pki } from '../support/pki.ts';

const issues = (env: Record<string, string>) => {
  const parsed = ConfigSchema.safeParse(env);
  return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};

describe('TLS configuration', () => {
  it('takes the variables together, and the user field from its list (default CN)', () => {
    expect(issues({ TLS_CERT: '/c.pem' })).toEqual(['TLS_CERT: TLS_CERT and TLS_KEY go together']);
    expect(issues({ TLS_CLIENT_CA: '/ca.pem' })).toEqual([
      'TLS_CLIENT_CA: TLS_CLIENT_CA needs TLS_CERT and TLS_KEY (client certificates are asked for over TLS)',
    ]);
    expect(issues({ TLS_CERT: '/c.pem', TLS_KEY: '/k.pem', TLS_CLIENT_CRL: '/x.crl' })).toEqual([
      'TLS_CLIENT_CRL: TLS_CLIENT_CRL needs TLS_CLIENT_CA',
    ]);
    expect(issues({ TLS_CLIENT_USER_FIELD: 'OU' })[0]).toMatch(/^TLS_CLIENT_USER_FIELD: /);
    expect(ConfigSchema.parse({}).TLS_CLIENT_USER_FIELD).toBe('CN');
    expect(ConfigSchema.parse({ TLS_CLIENT_USER_FIELD: 'SAN_EMAIL' }).TLS_CLIENT_USER_FIELD).toBe('SAN_EMAIL');
  });
});

const missing = opensslMissing();
if (missing !== undefined) process.stderr.write(`[pki] skipping the TLS file checks: ${missing}\n`);

describe.skipIf(missing !== undefined)('TLS files', () => {
  let pki: Pki;
  beforeAll(() => {
    pki = makePki();
  });
  afterAll(() => {
    pki.remove();
  });

  it('without TLS_CERT there is no TLS; without TLS_CLIENT_CA no client certificate is asked for', () => {
    expect(tlsServerOptions({})).toBeUndefined();
    expect(tlsServerOptions({ TLS_CERT: pki.files.serverCert, TLS_KEY: pki.files.serverKey })).not.toHaveProperty('requestCert');
    const full = tlsServerOptions({
      TLS_CERT: pki.files.serverCert,
      TLS_KEY: pki.files.serverKey,
      TLS_CLIENT_CA: pki.files.ca,
      TLS_CLIENT_CRL: pki.files.crl,
    });
    expect(full).toMatchObject({ requestCert: true, rejectUnauthorized: false });
  });

  it('names the variable of a file that is missing, of the wrong kind, or a key of another certificate', () => {
    const other = pki.issue('other');
    const garbage = join(pki.dir, 'garbage.pem');
    writeFileSync(garbage, 'not PEM at all');
    const base = { TLS_CERT: pki.files.serverCert, TLS_KEY: pki.files.serverKey };
    expect(() => tlsServerOptions({ ...base, TLS_CERT: join(pki.dir, 'nope.pem') })).toThrow(
      /^TLS_CERT \(.*nope\.pem\) cannot be read: ENOENT/,
    );
    expect(() => tlsServerOptions({ ...base, TLS_CERT: garbage })).toThrow(/^TLS_CERT \(.*\) is not a PEM certificate/);
    expect(() => tlsServerOptions({ ...base, TLS_KEY: garbage })).toThrow(/^TLS_KEY \(.*\) is not a PEM private key/);
    expect(() => tlsServerOptions({ ...base, TLS_KEY: other.key })).toThrow(/^TLS_KEY \(.*\) is not the key of TLS_CERT/);
    expect(() => tlsServerOptions({ ...base, TLS_CLIENT_CA: garbage })).toThrow(/^TLS_CLIENT_CA \(.*\) is not a PEM certificate bundle/);
    expect(() => tlsServerOptions({ ...base, TLS_CLIENT_CA: pki.files.ca, TLS_CLIENT_CRL: garbage })).toThrow(
      /^TLS_CLIENT_CRL \(.*\) is not a PEM CRL/,
    );
  });
});
