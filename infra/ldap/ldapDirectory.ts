// The directory port over LDAP (ldapts): OpenLDAP, Active Directory or any LDAPv3 server. A login
// finds the person with the service account (or a DN template), then binds as them with the
// password given: the directory alone judges it, and nothing of it is kept. Every exchange is
// bounded: LDAP_TIMEOUT_MS per operation (and for a whole login), LDAP_SIZE_LIMIT entries per
// search and values per attribute, paged so that a server's own limit shows as an error rather
// than as a silently shortened answer.

import { readFileSync } from 'node:fs';
import { Client, InvalidCredentialsError, SizeLimitExceededError, type Entry } from 'ldapts';
import type { Directory, DirectoryPerson } from '../../domain/ports.ts';
import { directoryAnswerTooLarge, directoryUnavailable, isDomainError } from '../../domain/shared/errors.ts';
import {
  OPENLDAP_ATTRIBUTES,
  parseAttributeMapping,
  personOf,
  requestedAttributes,
  valuesOf,
  type AttributeMapping,
  type EntryAttributes,
} from '../../modules/directory/domain/attributes.ts';
import type { Config } from '../config.ts';
import { escapeDnValue, everyUserFilter, fillTemplate, groupFilter, userFilter } from '../../modules/directory/domain/filter.ts';

export type LdapSettings = {
  /** ldap:// or ldaps:// (LDAP_URL). */
  url: string;
  /** Upgrade an ldap:// connection with StartTLS (LDAP_STARTTLS). */
  startTls: boolean;
  /** The CA certificates (PEM) a TLS connection is checked against (LDAP_CA_FILE); default Node's. */
  ca?: string;
  /** The service account (LDAP_BIND_DN, LDAP_BIND_PASSWORD); absent: searches are anonymous. */
  bind?: { dn: string; password: string };
  userBase: string;
  /** Holds `{username}` (LDAP_USER_FILTER). */
  userFilter: string;
  /** A person's DN from the login name (LDAP_USER_DN_TEMPLATE), instead of a search. */
  userDnTemplate?: string;
  /** The people the sync reads (LDAP_SYNC_FILTER); default the user filter with `{username}` as `*`. */
  syncFilter?: string;
  /** Where groups are searched for a person whose entry has no memberOf (LDAP_GROUP_BASE, LDAP_GROUP_FILTER with `{dn}`). */
  groupBase?: string;
  groupFilter: string;
  attributes: AttributeMapping;
  timeoutMs: number;
  sizeLimit: number;
};

/** Entries a page of a search asks for. */
const PAGE = 500;

const attributesOf = (entry: Entry): EntryAttributes =>
  Object.fromEntries(
    Object.entries(entry).flatMap(([name, value]) => {
      if (name === 'dn') return [];
      const values = (Array.isArray(value) ? value : [value]).map((v) => (typeof v === 'string' ? v : v.toString('utf8')));
      return [[name, values]];
    }),
  );

/** What a failure of the directory tells a client: what went wrong, not where the directory is. */
function unavailable(error: unknown, { timeoutMs, sizeLimit }: Pick<LdapSettings, 'timeoutMs' | 'sizeLimit'>): Error {
  if (isDomainError(error)) return error;
  // The server's own limit, lower than ours: its answer would be cut short.
  if (error instanceof SizeLimitExceededError)
    return directoryAnswerTooLarge("entries than the directory's own size limit allows, or", sizeLimit);
  const message = error instanceof Error ? error.message : String(error);
  if (/timeout|timed out/i.test(message)) return directoryUnavailable(`no answer within ${String(timeoutMs)} ms (LDAP_TIMEOUT_MS)`);
  const code = error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
  if (code !== undefined) return directoryUnavailable(`the directory could not be reached (${code})`);
  return directoryUnavailable(`the directory failed the request (${error instanceof Error ? error.name : 'error'})`);
}

/** One connection for `work`, closed after it; bounded by `deadlineMs` as a whole when given. */
async function connected<T>(settings: LdapSettings, work: (client: Client) => Promise<T>, deadlineMs?: number): Promise<T> {
  const tls = settings.ca === undefined ? {} : { ca: settings.ca };
  const client = new Client({
    url: settings.url,
    timeout: settings.timeoutMs,
    connectTimeout: settings.timeoutMs,
    strictDN: false,
    // ldapts speaks TLS from the first byte whenever it is given TLS options, whatever the URL's
    // scheme: only an ldaps:// URL gets them; StartTLS gives them to the upgrade, else the server
    // would see a TLS hello on its plain port and hang up.
    ...(/^ldaps:/i.test(settings.url) ? { tlsOptions: tls } : {}),
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    const run = (async () => {
      if (settings.startTls) await client.startTLS(tls);
      return work(client);
    })();
    if (deadlineMs === undefined) return await run;
    run.catch(() => undefined);
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new Error(`timed out after ${String(deadlineMs)} ms`));
      }, deadlineMs);
    });
    return await Promise.race([run, deadline]);
  } catch (error) {
    throw unavailable(error, settings);
  } finally {
    clearTimeout(timer);
    await client.unbind().catch(() => undefined);
  }
}

/** Entries of a search, paged; more than `limit`: the first limit + 1 (the caller decides). */
async function search(
  client: Client,
  base: string,
  filter: string,
  wanted: string[],
  limit: number,
  scope: 'sub' | 'base' = 'sub',
): Promise<{ dn: string; attributes: EntryAttributes }[]> {
  const found: { dn: string; attributes: EntryAttributes }[] = [];
  for await (const page of client.searchPaginated(base, {
    scope,
    filter,
    attributes: wanted,
    paged: { pageSize: Math.min(PAGE, limit + 1) },
  })) {
    for (const entry of page.searchEntries) found.push({ dn: entry.dn, attributes: attributesOf(entry) });
    if (found.length > limit) break;
  }
  return found;
}

/** Binds as the person; false when the directory says the password is not theirs. */
async function bindsAs(client: Client, dn: string, password: string): Promise<boolean> {
  try {
    await client.bind(dn, password);
    return true;
  } catch (error) {
    if (error instanceof InvalidCredentialsError) return false;
    throw error;
  }
}

export function ldapDirectory(settings: LdapSettings): Directory {
  const attributes = requestedAttributes(settings.attributes);

  const serviceBind = async (client: Client): Promise<void> => {
    if (settings.bind === undefined) return;
    try {
      await client.bind(settings.bind.dn, settings.bind.password);
    } catch (error) {
      if (error instanceof InvalidCredentialsError)
        throw directoryUnavailable('the directory refused the service account (LDAP_BIND_DN, LDAP_BIND_PASSWORD)');
      throw error;
    }
  };

  /** A person from their entry: groups from memberOf, else (LDAP_GROUP_BASE set) a group search. */
  async function personFrom(
    client: Client,
    entry: { dn: string; attributes: EntryAttributes },
    username: string,
  ): Promise<DirectoryPerson> {
    const memberOf = valuesOf(entry.attributes, settings.attributes.memberOf);
    if (memberOf.length > settings.sizeLimit)
      throw directoryAnswerTooLarge(`${settings.attributes.memberOf} values of one entry`, settings.sizeLimit);
    if (memberOf.length > 0 || settings.groupBase === undefined) return personOf(entry, settings.attributes);
    const groups = await search(
      client,
      settings.groupBase,
      groupFilter(settings.groupFilter, { dn: entry.dn, username }),
      ['1.1'],
      settings.sizeLimit,
    );
    if (groups.length > settings.sizeLimit) throw directoryAnswerTooLarge('groups of one person', settings.sizeLimit);
    return personOf(
      entry,
      settings.attributes,
      groups.map((g) => g.dn),
    );
  }

  return {
    async authenticate(username, password) {
      // An empty password is an unauthenticated bind (RFC 4513 5.1.2), which a directory may
      // answer with success while proving nothing: never sent.
      if (password === '' || username === '') return undefined;
      return connected(
        settings,
        async (client) => {
          if (settings.userDnTemplate !== undefined) {
            const dn = fillTemplate(settings.userDnTemplate, { username }, escapeDnValue);
            if (!(await bindsAs(client, dn, password))) return undefined;
            const [entry] = await search(client, dn, '(objectClass=*)', attributes, 1, 'base');
            return entry === undefined ? undefined : personFrom(client, entry, username);
          }
          await serviceBind(client);
          // Two are enough to know the name is ambiguous: then no one logs in by it.
          const entries = await search(client, settings.userBase, userFilter(settings.userFilter, username), attributes, 1);
          const [entry] = entries;
          if (entry === undefined || entries.length > 1) return undefined;
          // Read with the service account, judged only once the password is: a wrong one is a 401
          // whatever the entry holds.
          const person = await personFrom(client, entry, username).catch((error: unknown) =>
            error instanceof Error ? error : new Error(String(error)),
          );
          if (!(await bindsAs(client, entry.dn, password))) return undefined;
          if (person instanceof Error) throw person;
          return person;
        },
        settings.timeoutMs,
      );
    },

    async people() {
      return connected(settings, async (client) => {
        await serviceBind(client);
        const filter = settings.syncFilter ?? everyUserFilter(settings.userFilter);
        const entries = await search(client, settings.userBase, filter, attributes, settings.sizeLimit);
        if (entries.length > settings.sizeLimit) throw directoryAnswerTooLarge('people', settings.sizeLimit);
        const people: DirectoryPerson[] = [];
        for (const entry of entries) {
          const code = valuesOf(entry.attributes, settings.attributes.code)[0] ?? '';
          people.push(await personFrom(client, entry, code));
        }
        return people;
      });
    },

    close: () => Promise.resolve(),
  };
}

/** The directory the configuration names (LDAP_URL), or none. */
export function ldapSettingsOf(config: Config): LdapSettings | undefined {
  if (config.LDAP_URL === undefined || config.LDAP_USER_BASE === undefined) return undefined;
  const mapping = parseAttributeMapping(config.LDAP_ATTRIBUTES);
  return {
    url: config.LDAP_URL,
    startTls: config.LDAP_STARTTLS,
    ...(config.LDAP_CA_FILE === undefined ? {} : { ca: readFileSync(config.LDAP_CA_FILE, 'utf8') }),
    ...(config.LDAP_BIND_DN === undefined ? {} : { bind: { dn: config.LDAP_BIND_DN, password: config.LDAP_BIND_PASSWORD ?? '' } }),
    userBase: config.LDAP_USER_BASE,
    userFilter: config.LDAP_USER_FILTER,
    ...(config.LDAP_USER_DN_TEMPLATE === undefined ? {} : { userDnTemplate: config.LDAP_USER_DN_TEMPLATE }),
    ...(config.LDAP_SYNC_FILTER === undefined ? {} : { syncFilter: config.LDAP_SYNC_FILTER }),
    ...(config.LDAP_GROUP_BASE === undefined ? {} : { groupBase: config.LDAP_GROUP_BASE }),
    groupFilter: config.LDAP_GROUP_FILTER,
    attributes: 'mapping' in mapping ? mapping.mapping : OPENLDAP_ATTRIBUTES,
    timeoutMs: config.LDAP_TIMEOUT_MS,
    sizeLimit: config.LDAP_SIZE_LIMIT,
  };
}
