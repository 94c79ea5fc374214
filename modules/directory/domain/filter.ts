// What the service puts into a directory request from a login name: LDAP filters (RFC 4515) and
// distinguished names (RFC 4514) are languages, and a name typed at login is data, never syntax.
// `a)(uid=*` must search for a user literally named so, not widen the filter.

/** A value for an LDAP filter's assertion (RFC 4515 section 3): `*`, `(`, `)`, `\` and NUL as
 * `\XX`, and so every other control character, which no name has a reason to hold. */
export const escapeFilterValue = (value: string): string =>
  // eslint-disable-next-line no-control-regex -- control characters are what this escapes
  value.replace(/[*()\\\x00-\x1f\x7f]/g, (c) => `\\${c.charCodeAt(0).toString(16).padStart(2, '0')}`);

/** A value for an attribute of a DN (RFC 4514 section 2.4): the special characters with a
 * backslash, a leading space or `#` and a trailing space too, NUL as `\00`. */
export function escapeDnValue(value: string): string {
  // eslint-disable-next-line no-control-regex -- NUL is what this escapes
  const escaped = value.replace(/[,+"\\<>;=]/g, (c) => `\\${c}`).replace(/\x00/g, '\\00');
  return escaped.replace(/^([ #])/, '\\$1').replace(/ $/, '\\ ');
}

/** A template with `{name}` placeholders filled: each value escaped by `escape`. A placeholder with
 * no value is left as it is (the configuration's check names it). */
export const fillTemplate = (template: string, values: Readonly<Record<string, string>>, escape: (value: string) => string): string =>
  template.replace(/\{([A-Za-z]+)\}/g, (whole, name: string) => (Object.hasOwn(values, name) ? escape(values[name] ?? '') : whole));

/** The user filter for a login name (LDAP_USER_FILTER holds `{username}`). */
export const userFilter = (template: string, username: string): string => fillTemplate(template, { username }, escapeFilterValue);

/** The same filter selecting every person it could name: `{username}` as a presence (`(uid=*)`),
 * for the sync. */
export const everyUserFilter = (template: string): string => fillTemplate(template, { username: '*' }, (v) => v);

/** The group filter for a person (LDAP_GROUP_FILTER holds `{dn}`, and may hold `{username}`). */
export const groupFilter = (template: string, person: { dn: string; username: string }): string =>
  fillTemplate(template, { dn: person.dn, username: person.username }, escapeFilterValue);

/** Whether a filter is one balanced parenthesised expression (a configuration check: a template
 * that is not would make every search fail). */
export function isBalancedFilter(filter: string): boolean {
  if (!filter.startsWith('(') || !filter.endsWith(')')) return false;
  let depth = 0;
  for (let i = 0; i < filter.length; i++) {
    const c = filter[i];
    if (c === '\\') i += 2;
    else if (c === '(') depth++;
    else if (c === ')' && --depth < 0) return false;
    if (depth === 0 && i < filter.length - 1) return false;
  }
  return depth === 0;
}
