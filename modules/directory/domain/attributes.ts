// Which directory attribute holds which field of a user (LDAP_ATTRIBUTES), and a directory entry
// read through that mapping. OpenLDAP's inetOrgPerson names are the default; Active Directory's
// differ only in the login name (sAMAccountName or userPrincipalName).

import type { DirectoryPerson } from '../../../domain/ports.ts';

export const MappedFields = ['code', 'givenName', 'familyName', 'email', 'phoneNumber', 'memberOf'] as const;
export type MappedField = (typeof MappedFields)[number];
export type AttributeMapping = Readonly<Record<MappedField, string>>;

/** OpenLDAP (inetOrgPerson and the memberOf overlay). */
export const OPENLDAP_ATTRIBUTES: AttributeMapping = {
  code: 'uid',
  givenName: 'givenName',
  familyName: 'sn',
  email: 'mail',
  phoneNumber: 'telephoneNumber',
  memberOf: 'memberOf',
};

/** An attribute description (RFC 4512: a name, or an OID), with options (`;lang-en`). */
const ATTRIBUTE = /^([A-Za-z][A-Za-z0-9-]*|[0-9]+(\.[0-9]+)+)(;[A-Za-z0-9-]+)*$/;

/**
 * LDAP_ATTRIBUTES: `field=attribute` pairs, comma-separated (`code=sAMAccountName,email=mail`), or
 * a JSON object of the same; the fields left out keep OpenLDAP's names. Answers the mapping, or the
 * problems that make the text unusable.
 */
export function parseAttributeMapping(text: string | undefined): { mapping: AttributeMapping } | { problems: string[] } {
  if (text === undefined || text.trim() === '') return { mapping: OPENLDAP_ATTRIBUTES };
  let pairs: [string, unknown][];
  if (text.trim().startsWith('{')) {
    try {
      const parsed: unknown = JSON.parse(text);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        return { problems: ['a JSON mapping is an object of field to attribute'] };
      pairs = Object.entries(parsed);
    } catch {
      return { problems: ['neither field=attribute pairs nor a JSON object'] };
    }
  } else {
    pairs = text.split(',').map((pair) => {
      const at = pair.indexOf('=');
      return at < 0 ? [pair.trim(), undefined] : [pair.slice(0, at).trim(), pair.slice(at + 1).trim()];
    });
  }
  const mapping: Record<string, string> = { ...OPENLDAP_ATTRIBUTES };
  const problems: string[] = [];
  for (const [field, attribute] of pairs) {
    if (!(MappedFields as readonly string[]).includes(field))
      problems.push(`${JSON.stringify(field)} is not one of ${MappedFields.join(', ')}`);
    else if (typeof attribute !== 'string' || !ATTRIBUTE.test(attribute))
      problems.push(`${field}: ${JSON.stringify(attribute)} is not an attribute name`);
    else mapping[field] = attribute;
  }
  return problems.length > 0 ? { problems } : { mapping: mapping as AttributeMapping };
}

/** The attributes to ask the directory for. */
export const requestedAttributes = (mapping: AttributeMapping): string[] => [...new Set(Object.values(mapping))];

/** An entry's attributes as the directory answered them: names as it spelled them, values as text. */
export type EntryAttributes = Readonly<Record<string, readonly string[]>>;

/** The values of an attribute, its name compared case-insensitively (as LDAP compares them). */
export function valuesOf(attributes: EntryAttributes, name: string): readonly string[] {
  const wanted = name.toLowerCase();
  for (const [key, values] of Object.entries(attributes)) if (key.toLowerCase() === wanted) return values;
  return [];
}

const first = (attributes: EntryAttributes, name: string): string | undefined => {
  const value = valuesOf(attributes, name)[0]?.trim();
  return value === undefined || value === '' ? undefined : value;
};

/** A directory entry as a person: each field from its attribute's first value (absent when the
 * entry has none); `groups` from memberOf, or the DNs a group search found when given. */
export function personOf(
  entry: { dn: string; attributes: EntryAttributes },
  mapping: AttributeMapping,
  searchedGroups?: readonly string[],
): DirectoryPerson {
  const person: { -readonly [K in keyof DirectoryPerson]: DirectoryPerson[K] } = {
    dn: entry.dn,
    groups: searchedGroups ?? valuesOf(entry.attributes, mapping.memberOf),
  };
  for (const field of ['code', 'givenName', 'familyName', 'email', 'phoneNumber'] as const) {
    const value = first(entry.attributes, mapping[field]);
    if (value !== undefined) person[field] = value;
  }
  return person;
}
