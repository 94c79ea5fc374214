// A real OpenLDAP (Debian's slapd) for the tests and by hand: a loopback server on a free port,
// from a temporary folder holding its configuration (slapd.conf, read with -f) and database,
// seeded over LDAP (so that the memberOf overlay fills memberOf, which slapadd would not) with the
// tree below. Nothing is installed here: slapd and ldap-utils come from apt (.ci/run installs them).
//
//   npm run openldap                 run it until Ctrl-C, printing its URL and the admin's DN
//
// With `tls` (PEM files of a server certificate, its key and the CA), it also listens on an
// ldaps:// port and offers StartTLS on the ldap:// one.
//
// The test run's slapd is started by test/support/openldap.globalSetup.ts through startOpenLdap.
//
// The tree (dc=example,dc=org; every password is `<uid>-secret`):
//   ou=people   alice, bob, carol (inetOrgPerson, uid), and `d*ve`, whose uid holds a `*`
//   ou=ad       Dana Dane: Active Directory's names (sAMAccountName ddane, userPrincipalName)
//   ou=groups   operators (alice), auditors (alice, bob), everyone (alice, bob, carol, d*ve),
//               ad-admins (Dana): groupOfNames with member, memberOf kept by the overlay

import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const BASE_DN = 'dc=example,dc=org';
export const ADMIN_DN = `cn=admin,${BASE_DN}`;
export const ADMIN_PASSWORD = 'admin-secret';
const START_TIMEOUT_MS = 20_000;

const SLAPD_CANDIDATES = ['/usr/sbin/slapd', 'slapd'];

/** Active Directory's login names (their AD OIDs), on an auxiliary class of our own. */
const AD_SCHEMA = `
attributetype ( 1.2.840.113556.1.4.221 NAME 'sAMAccountName'
  EQUALITY caseIgnoreMatch SUBSTR caseIgnoreSubstringsMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.15{256} SINGLE-VALUE )
attributetype ( 1.2.840.113556.1.4.656 NAME 'userPrincipalName'
  EQUALITY caseIgnoreMatch SUBSTR caseIgnoreSubstringsMatch
  SYNTAX 1.3.6.1.4.1.1466.115.121.1.15{1024} SINGLE-VALUE )
objectclass ( 1.3.6.1.4.1.4203.666.11.1 NAME 'adLikeAccount' SUP top AUXILIARY
  MAY ( sAMAccountName $ userPrincipalName ) )
`;

/** The files a TLS-speaking slapd serves its certificate from. */
export type SlapdTls = { cert: string; key: string; ca: string };

const tlsConfig = (tls: SlapdTls | undefined): string =>
  tls === undefined ? '' : `TLSCACertificateFile ${tls.ca}\nTLSCertificateFile ${tls.cert}\nTLSCertificateKeyFile ${tls.key}\n`;

const config = (dir: string, tls?: SlapdTls): string => `
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include ${join(dir, 'ad.schema')}
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile ${join(dir, 'slapd.pid')}
argsfile ${join(dir, 'slapd.args')}
${tlsConfig(tls)}# An unauthenticated bind (a DN with an empty password) succeeds here, as some directories let it:
# the service must refuse an empty password itself, never take such a bind for a login.
allow bind_anon_dn
sizelimit size.soft=1000 size.hard=unlimited size.prtotal=unlimited
database mdb
maxsize 67108864
suffix "${BASE_DN}"
rootdn "${ADMIN_DN}"
rootpw ${ADMIN_PASSWORD}
directory ${join(dir, 'db')}
index objectClass eq
index uid,member eq
overlay memberof
memberof-group-oc groupOfNames
memberof-member-ad member
memberof-memberof-ad memberOf
memberof-refint TRUE
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
`;

const person = (uid: string, given: string, family: string, phone: string) => `dn: uid=${uid},ou=people,${BASE_DN}
objectClass: inetOrgPerson
uid: ${uid}
cn: ${given} ${family}
givenName: ${given}
sn: ${family}
mail: ${uid.replace('*', '')}@example.org
telephoneNumber: ${phone}
userPassword: ${uid}-secret
`;

const group = (cn: string, members: readonly string[]) => `dn: cn=${cn},ou=groups,${BASE_DN}
objectClass: groupOfNames
cn: ${cn}
${members.map((m) => `member: ${m}`).join('\n')}
`;

const people = (uid: string) => `uid=${uid},ou=people,${BASE_DN}`;
const DANA = `cn=Dana Dane,ou=ad,${BASE_DN}`;

/** The seeded tree (see the top of this file). */
export const SEED_LDIF = [
  `dn: ${BASE_DN}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n`,
  ...['people', 'groups', 'ad'].map((ou) => `dn: ou=${ou},${BASE_DN}\nobjectClass: organizationalUnit\nou: ${ou}\n`),
  person('alice', 'Alice', 'Archer', '+420 601 000 001'),
  person('bob', 'Bob', 'Baker', '+420 601 000 002'),
  person('carol', 'Carol', 'Cook', '+420 601 000 003'),
  person('d*ve', 'Dave', 'Star', '+420 601 000 004'),
  `dn: ${DANA}\nobjectClass: inetOrgPerson\nobjectClass: adLikeAccount\ncn: Dana Dane\nsAMAccountName: ddane\nuserPrincipalName: ddane@corp.example.org\n` +
    'givenName: Dana\nsn: Dane\nmail: dana.dane@corp.example.org\ntelephoneNumber: +420 601 000 005\nuserPassword: ddane-secret\n',
  group('operators', [people('alice')]),
  group('auditors', [people('alice'), people('bob')]),
  group('everyone', [people('alice'), people('bob'), people('carol'), people('d*ve')]),
  group('ad-admins', [DANA]),
].join('\n');

/** Where slapd is, or why it is not there. */
export function findSlapd(): { slapd: string } | { missing: string } {
  for (const candidate of SLAPD_CANDIDATES) {
    const probe = spawnSync(candidate, ['-VV'], { encoding: 'utf8' });
    if (probe.error === undefined) {
      const ldapadd = spawnSync('ldapadd', ['-VV'], { encoding: 'utf8' });
      if (ldapadd.error !== undefined) return { missing: 'ldapadd is not on PATH (Debian: apt-get install ldap-utils)' };
      return { slapd: candidate };
    }
  }
  return { missing: 'slapd is not installed (Debian: apt-get install slapd ldap-utils; .ci/run does it)' };
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (typeof address === 'object' && address !== null) resolve(address.port);
        else reject(new Error('no port'));
      });
    });
  });

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => {
      resolve(false);
    });
  });

export type RunningOpenLdap = {
  url: string;
  /** The ldaps:// URL, when started with `tls`. */
  ldapsUrl?: string;
  baseDn: string;
  adminDn: string;
  adminPassword: string;
  version: string;
  stop(): Promise<void>;
};

/** Starts slapd in a fresh folder under `parent` (default the system's temporary folder) and
 * seeds it; stop() ends it and removes the folder. With `tls`, it speaks TLS too (see the top). */
export async function startOpenLdap(slapd: string, parent = tmpdir(), tls?: SlapdTls): Promise<RunningOpenLdap> {
  const dir = mkdtempSync(join(parent, 'openldap-'));
  mkdirSync(join(dir, 'db'));
  writeFileSync(join(dir, 'ad.schema'), AD_SCHEMA);
  writeFileSync(join(dir, 'slapd.conf'), config(dir, tls));
  writeFileSync(join(dir, 'seed.ldif'), SEED_LDIF);
  const version = /slapd ([0-9.]+)/.exec(spawnSync(slapd, ['-VV'], { encoding: 'utf8' }).stderr)?.[1] ?? 'unknown';
  const port = await freePort();
  const url = `ldap://127.0.0.1:${String(port)}`;
  const tlsPort = tls === undefined ? undefined : await freePort();
  const ldapsUrl = tlsPort === undefined ? undefined : `ldaps://127.0.0.1:${String(tlsPort)}`;
  const listeners = [`${url}/`, ...(ldapsUrl === undefined ? [] : [`${ldapsUrl}/`])].join(' ');
  let output = '';
  // -d 0: in the foreground (a child we can stop), logging nothing but its errors.
  const child: ChildProcess = spawn(slapd, ['-f', join(dir, 'slapd.conf'), '-h', listeners, '-d', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const deadline = Date.now() + START_TIMEOUT_MS;
    while (!(await accepts(port))) {
      if (child.exitCode !== null) throw new Error(`slapd exited (${String(child.exitCode)}): ${output.trim().slice(-2000)}`);
      if (Date.now() > deadline)
        throw new Error(`slapd did not listen on ${url} within ${String(START_TIMEOUT_MS)} ms: ${output.trim().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const seeded = spawnSync('ldapadd', ['-x', '-H', url, '-D', ADMIN_DN, '-w', ADMIN_PASSWORD, '-f', join(dir, 'seed.ldif')], {
      encoding: 'utf8',
    });
    if (seeded.status !== 0) throw new Error(`ldapadd of the seed failed: ${seeded.stderr.trim()}`);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    ...(ldapsUrl === undefined ? {} : { ldapsUrl }),
    baseDn: BASE_DN,
    adminDn: ADMIN_DN,
    adminPassword: ADMIN_PASSWORD,
    version: `OpenLDAP slapd ${version}`,
    stop,
  };
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const found = findSlapd();
  if ('missing' in found) {
    console.error(found.missing);
    process.exit(1);
  }
  const running = await startOpenLdap(found.slapd);
  console.log(
    `${running.version} at ${running.url}\n  base ${running.baseDn}\n  admin ${running.adminDn} / ${running.adminPassword}\nCtrl-C stops it.`,
  );
  const stop = () => void running.stop().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
