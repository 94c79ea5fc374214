// Vitest global setup: one OpenLDAP (Debian's slapd, scripts/openldap.ts) per test run, on a free
// loopback port with the seeded tree, for the directory login and sync suites. Where slapd is not
// installed they skip with the reason printed (.ci/run installs it from apt).

import type { TestProject } from 'vitest/node';
import { findSlapd, startOpenLdap } from '../../scripts/openldap.ts';

declare module 'vitest' {
  // Declaration merging needs an interface.
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions
  export interface ProvidedContext {
    /** The run's OpenLDAP (`ldap://127.0.0.1:PORT`), undefined when there is none. */
    ldapUrl: string | undefined;
    /** Which slapd that is, or why there is none. */
    ldapSource: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const say = (line: string): void => {
    process.stderr.write(`[openldap] ${line}\n`);
  };
  const none = (reason: string): (() => Promise<void>) => {
    say(`no OpenLDAP for the directory suites: ${reason}`);
    project.provide('ldapUrl', undefined);
    project.provide('ldapSource', reason);
    return () => Promise.resolve();
  };
  const found = findSlapd();
  if ('missing' in found) return none(found.missing);
  try {
    const running = await startOpenLdap(found.slapd);
    say(`${running.version} at ${running.url} (seeded: ${running.baseDn})`);
    project.provide('ldapUrl', running.url);
    project.provide('ldapSource', running.version);
    return () => running.stop();
  } catch (error) {
    return none(error instanceof Error ? error.message : String(error));
  }
}
