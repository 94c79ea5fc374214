// admin.http is documentation that runs: every request of it, in order, against the service, twice
// (the file must clean up after itself), with the REST client's variables it uses: file variables,
// {{$timestamp}}, {{$guid}} and a named request's response ({{create.response.body.$.path}},
// {{create.response.headers.Name}}).

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { TEST_SECRET, startTestApp, type TestApp } from '../support/testApp.ts';
import { findLibreOffice } from '../../infra/libreoffice/officeConverter.ts';
import { signHs256 } from '../../api/auth.ts';
import { ldapDirectory } from '../../infra/ldap/ldapDirectory.ts';
import { ldapUrl, openLdapSettings } from '../support/openldap.ts';

type Request = {
  title: string;
  name: string | undefined;
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
};

function parse(text: string): { variables: Map<string, string>; requests: Request[] } {
  const variables = new Map<string, string>();
  const requests: Request[] = [];
  for (const block of text.split(/^###/m)) {
    const lines = block.split('\n');
    const title = lines[0]?.trim() ?? '';
    const content = lines.slice(1).filter((l) => !l.startsWith('#') || l.startsWith('# @name'));
    const name = content
      .find((l) => l.startsWith('# @name'))
      ?.slice('# @name'.length)
      .trim();
    const rest = content.filter((l) => !l.startsWith('#'));
    for (const l of block.split('\n').filter((x) => x.startsWith('@'))) {
      const m = /^@(\w+)\s*=\s*(.*)$/.exec(l);
      if (m?.[1] !== undefined && m[2] !== undefined) variables.set(m[1], m[2].trim());
    }
    const start = rest.findIndex((l) => /^(GET|POST|PUT|PATCH|DELETE) /.test(l));
    if (start < 0) continue;
    const [method = '', url = ''] = (rest[start] ?? '').split(' ');
    const headers: Record<string, string> = {};
    let i = start + 1;
    for (; i < rest.length && (rest[i] ?? '').trim() !== ''; i++) {
      const [k = '', ...v] = (rest[i] ?? '').split(':');
      headers[k.trim().toLowerCase()] = v.join(':').trim();
    }
    const body = rest.slice(i).join('\n').trim();
    requests.push({ title, name, method, url, headers, body: body === '' ? undefined : body });
  }
  return { variables, requests };
}

const at = (value: unknown, path: readonly string[]): unknown =>
  path.reduce<unknown>((v, k) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>)[k] : undefined), value);

const officeMissing = findLibreOffice(process.env.SOFFICE_PATH) === undefined;
if (officeMissing)
  process.stderr.write('[admin.http] LibreOffice not found: its office-format requests are expected to answer 503 saying so\n');
let t: TestApp;
beforeAll(async () => {
  // The run's OpenLDAP for the directory sync, where there is one (503 without: the title says so).
  t = await startTestApp(ldapUrl() === undefined ? {} : { extra: { directory: ldapDirectory(openLdapSettings()) } });
});
afterAll(async () => {
  await t.close();
});

it('every request of admin.http answers as documented, run top to bottom twice', async () => {
  const { variables, requests } = parse(readFileSync('admin.http', 'utf8'));
  const base = await t.listen();
  variables.set('base', base);
  variables.set('token', t.tokens.admin);
  variables.set('viewerToken', await signHs256(TEST_SECRET, { sub: 'vera', roles: ['viewer'] }));
  expect(requests.length).toBeGreaterThan(25);
  for (const round of [1, 2]) {
    const responses = new Map<string, unknown>();
    const responseHeaders = new Map<string, Headers>();
    const fill = (s: string): string =>
      s.replace(/\{\{([^}]+)\}\}/g, (_m, expr: string) => {
        // A person runs the file twice at least seconds apart: each round is its own second.
        if (expr === '$timestamp') return String(Math.floor(Date.now() / 1000) + round * 3600);
        if (expr === '$guid') return randomUUID();
        const header = /^(\w+)\.response\.headers\.(.+)$/.exec(expr);
        if (header?.[1] !== undefined && header[2] !== undefined) return responseHeaders.get(header[1])?.get(header[2]) ?? '';
        const named = /^(\w+)\.response\.body\.\$\.(.+)$/.exec(expr);
        if (named?.[1] !== undefined && named[2] !== undefined) return String(at(responses.get(named[1]), named[2].split('.')));
        const value = variables.get(expr);
        if (value === undefined) throw new Error(`admin.http uses an unknown variable {{${expr}}}`);
        return fill(value);
      });
    for (const r of requests) {
      const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, fill(v)]));
      const res = await fetch(fill(r.url), { method: r.method, headers, ...(r.body === undefined ? {} : { body: fill(r.body) }) });
      const text = await res.text();
      // Office formats need LibreOffice, an optional extra: where it is absent the service says so (503).
      const officeAbsent = officeMissing && /format=(docx|doc|xlsx|xls|odt|ods)\b/.test(r.url);
      const directoryAbsent = ldapUrl() === undefined && r.url.includes('/directory/');
      // A title that names a 403 or a 304 (a conditional read) documents that answer.
      const documented = /\b(403|304)\b/.exec(r.title)?.[1];
      const expected = documented !== undefined ? Number(documented) : officeAbsent || directoryAbsent ? 503 : undefined;
      if (expected === undefined)
        expect(res.status, `round ${String(round)}: ${r.method} ${r.url} (${r.title}): ${text.slice(0, 300)}`).toBeLessThan(300);
      else expect(res.status, `${r.method} ${r.url}`).toBe(expected);
      if (r.name !== undefined) {
        responses.set(r.name, JSON.parse(text));
        responseHeaders.set(r.name, res.headers);
      }
    }
  }
});
