// A throwaway PKI made with the openssl command line (node:crypto cannot sign X.509): a CA with its
// CRL, another CA, a server certificate for 127.0.0.1, and client certificates valid, expired,
// revoked and from the other CA. `openssl ca` places a certificate's dates anywhere in time
// (-startdate/-enddate), which `openssl x509 -req` does only from OpenSSL 3.4.

import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Why the PKI tests cannot run here, or undefined when they can. */
export function opensslMissing(): string | undefined {
  const run = spawnSync('openssl', ['version'], { encoding: 'utf8' });
  return run.error === undefined && run.status === 0
    ? undefined
    : `openssl is not on PATH (${run.error?.message ?? run.stderr}): install it (Debian: apt-get install openssl)`;
}

export type Pair = { cert: string; key: string };

const CA_CONFIG = `
[ ca ]
default_ca = ca_default
[ ca_default ]
database = index.txt
new_certs_dir = issued
serial = serial
crlnumber = crlnumber
default_md = sha256
policy = any
unique_subject = no
copy_extensions = copy
default_crl_days = 30
[ any ]
commonName = supplied
emailAddress = optional
[ client ]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
[ server ]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
`;

export type Pki = {
  dir: string;
  /** PEM files: the CA's certificate, its CRL, the server's certificate and key. */
  files: { ca: string; crl: string; otherCa: string; serverCert: string; serverKey: string };
  /** The CA's certificate (what a client trusts the server by). */
  caPem: string;
  /** A client certificate signed by the CA (subject `/CN=...`, optional extra subject parts and
   * subjectAltName), valid for `days` from now or between two dates (YYYYMMDDHHMMSSZ). */
  issue(name: string, options?: { subject?: string; san?: string; start?: string; end?: string; by?: 'ca' | 'otherCa' }): Pair;
  /** Revokes a certificate the CA issued and writes a new CRL to `files.crl` (or to `to`). */
  revoke(pair: Pair, to?: string): void;
  /** A self-signed certificate (no CA at all). */
  selfSigned(name: string, subject: string): Pair;
  remove(): void;
};

export function makePki(): Pki {
  const dir = mkdtempSync(join(tmpdir(), 'admin-pki-'));
  const run = (cwd: string, args: string[]): void => {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  };
  const newKey = (path: string): string[] => ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', path];
  const makeCa = (name: string, subject: string): string => {
    const ca = join(dir, name);
    mkdirSync(join(ca, 'issued'), { recursive: true });
    writeFileSync(join(ca, 'index.txt'), '');
    writeFileSync(join(ca, 'serial'), '1000\n');
    writeFileSync(join(ca, 'crlnumber'), '1000\n');
    writeFileSync(join(ca, 'ca.cnf'), CA_CONFIG);
    run(ca, ['req', '-x509', ...newKey('ca.key'), '-out', 'ca.pem', '-days', '3650', '-subj', subject]);
    return ca;
  };
  const ca = makeCa('ca', '/CN=Test Client CA');
  const otherCa = makeCa('other-ca', '/CN=Another CA');
  const sign = (caDir: string, name: string, subject: string, extensions: string, dates: string[], san?: string): Pair => {
    const key = join(dir, `${name}.key`);
    const csr = join(dir, `${name}.csr`);
    const cert = join(dir, `${name}.pem`);
    run(caDir, ['req', ...newKey(key), '-out', csr, '-subj', subject, ...(san === undefined ? [] : ['-addext', `subjectAltName=${san}`])]);
    run(caDir, [
      'ca',
      '-batch',
      '-config',
      'ca.cnf',
      '-cert',
      'ca.pem',
      '-keyfile',
      'ca.key',
      '-in',
      csr,
      '-out',
      cert,
      '-extensions',
      extensions,
      '-notext',
      ...dates,
    ]);
    return { cert, key };
  };
  const gencrl = (to: string): void => {
    run(ca, ['ca', '-config', 'ca.cnf', '-cert', 'ca.pem', '-keyfile', 'ca.key', '-gencrl', '-out', to]);
  };
  const crl = join(dir, 'ca.crl');
  gencrl(crl);
  const server = sign(ca, 'server', '/CN=localhost', 'server', ['-days', '30']);
  return {
    dir,
    files: { ca: join(ca, 'ca.pem'), crl, otherCa: join(otherCa, 'ca.pem'), serverCert: server.cert, serverKey: server.key },
    caPem: readFileSync(join(ca, 'ca.pem'), 'utf8'),
    issue: (name, { subject = `/CN=${name}`, san, start, end, by = 'ca' } = {}) =>
      sign(
        by === 'ca' ? ca : otherCa,
        name,
        subject,
        'client',
        start === undefined ? ['-days', '30'] : ['-startdate', start, '-enddate', end ?? start],
        san,
      ),
    revoke: (pair, to = crl) => {
      run(ca, ['ca', '-config', 'ca.cnf', '-cert', 'ca.pem', '-keyfile', 'ca.key', '-revoke', pair.cert]);
      gencrl(to);
    },
    selfSigned: (name, subject) => {
      const pair = { cert: join(dir, `${name}.pem`), key: join(dir, `${name}.key`) };
      run(dir, ['req', '-x509', ...newKey(pair.key), '-out', pair.cert, '-days', '30', '-subj', subject]);
      return pair;
    },
    remove: () => {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
