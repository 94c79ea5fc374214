// The error catalogue (domain/shared/errorCatalogue.ts) is the one list of the codes the service
// answers: every code the HTTP contract or a test names is in it, every entry is one the code
// raises, and an error takes its status from it.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { catalogueEntry, ERROR_CATALOGUE, HttpStatus, type ErrorCode, type StatusName } from '../../../domain/shared/errorCatalogue.ts';
import { DomainError, unavailable } from '../../../domain/shared/errors.ts';

const CODE = /[A-Z][A-Z0-9_]*(?:\.[A-Z][A-Z0-9_]*)+/g;
const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => join(dir, f));

describe('the error catalogue', () => {
  it('declares every code openapi.json names', () => {
    const named = [...new Set(readFileSync('openapi.json', 'utf8').match(CODE) ?? [])];
    expect(named.length).toBeGreaterThan(10);
    expect(named.filter((code) => catalogueEntry(code) === undefined)).toEqual([]);
  });

  // TEST.* and X.* are placeholders of tests that need some code (the render queue's, the CLI's fake answers).
  it('declares every code a test names, but for placeholders', () => {
    const quoted = new RegExp(`['\`](${CODE.source})['\`]`, 'g');
    const named = new Set(filesUnder('test').flatMap((f) => [...readFileSync(f, 'utf8').matchAll(quoted)].map((m) => m[1] ?? '')));
    expect(named.size).toBeGreaterThan(30);
    expect([...named].filter((code) => !/^(TEST|X)\./.test(code) && catalogueEntry(code) === undefined)).toEqual([]);
  });

  it('declares only codes the service raises', () => {
    const source = ['api', 'application', 'domain', 'modules', 'infra', 'workers', 'projections']
      .flatMap(filesUnder)
      .filter((f) => !f.endsWith('errorCatalogue.ts'))
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    // Codes built from parts: HTTP.<status> by the error handler, <store>.UNAVAILABLE by StoreUnavailableError.
    const raised = (code: string): boolean => {
      if (code.startsWith('HTTP.')) return source.includes('`HTTP.${name}`') || source.includes(`'${code}'`);
      if (code.endsWith('_STORE.UNAVAILABLE'))
        return source.includes('`${store}.UNAVAILABLE`') && source.includes(`'${code.slice(0, -'.UNAVAILABLE'.length)}'`);
      if (code === '<RESOURCE>.<KEY>_TAKEN') return source.includes('_TAKEN`');
      if (code.startsWith('<RESOURCE>.')) return source.includes(`}.${code.slice('<RESOURCE>.'.length)}\``);
      return source.includes(`'${code}'`);
    };
    expect(Object.keys(ERROR_CATALOGUE).filter((code) => !raised(code))).toEqual([]);
  });

  it('has HTTP.<STATUS> for every status under 500, with that status', () => {
    const http = Object.entries(ERROR_CATALOGUE).filter(([code]) => code.startsWith('HTTP.'));
    expect(http.filter(([code, entry]) => code !== `HTTP.${entry.status}`)).toEqual([]);
    const under500 = (Object.keys(HttpStatus) as StatusName[]).filter((s) => HttpStatus[s] < 500);
    expect(under500.filter((s) => !(`HTTP.${s}` in ERROR_CATALOGUE))).toEqual([]);
  });

  it('gives an error the status of its code, and of its resource for a per-resource code', () => {
    expect(new DomainError('USER.LAST_ADMIN', 'x').status).toBe('CONFLICT');
    expect([
      new DomainError('USER.THUMBNAIL.NOT_FOUND', 'x').httpStatus,
      new DomainError('USER_GROUP.LDAP_MEMBER_OF_TAKEN', 'x').httpStatus,
    ]).toEqual([404, 409]);
    expect(new DomainError('READ_MODEL.REBUILDING', 'x', [], { status: 'CONFLICT' }).httpStatus).toBe(409);
    expect(unavailable('READ_MODEL.REBUILDING', 'x').httpStatus).toBe(503);
  });

  it('refuses a code it does not declare, and a status it does not declare for the code', () => {
    // @ts-expect-error -- a code that is not declared does not compile
    expect(() => new DomainError('TEST.NO_SUCH_THING', 'x')).toThrow(/not in the error catalogue/);
    expect(() => new DomainError('NOTHING' as ErrorCode, 'x')).toThrow(/not in the error catalogue/);
    expect(() => new DomainError('USER.LAST_ADMIN', 'x', [], { status: 'CONFLICT' })).not.toThrow();
    expect(() => new DomainError('AUTH.FORBIDDEN', 'x', [], { status: 'CONFLICT' })).toThrow(/not declared with status CONFLICT/);
    // @ts-expect-error -- unavailable() takes only the codes declared 503
    unavailable('USER.LAST_ADMIN', 'x');
  });
});
