// The LibreOffice converter's discipline, on a real soffice: one document at a time with a bounded
// queue (busy: 503 with a retry delay), a time limit that stops the processes, and a fresh process
// after a crash. Skipped, saying so, where LibreOffice is not installed.

import { afterEach, describe, expect, it } from 'vitest';
import { DomainError } from '../../../domain/shared/errors.ts';
import { findLibreOffice, LibreOfficeConverter } from '../../../infra/libreoffice/officeConverter.ts';
import { partText } from '../../support/office.ts';

const office = findLibreOffice(process.env.SOFFICE_PATH);
if (office === undefined) process.stderr.write('[office] skipping the LibreOffice converter tests: soffice with python3-uno not found\n');

const html = (text: string) => new TextEncoder().encode(`<html><body><p>${text}</p></body></html>`);
const converters: LibreOfficeConverter[] = [];
const converter = (options: ConstructorParameters<typeof LibreOfficeConverter>[0] = {}) => {
  const c = new LibreOfficeConverter(options);
  converters.push(c);
  return c;
};
afterEach(async () => {
  await Promise.all(converters.splice(0).map((c) => c.close()));
});

const failure = async (work: Promise<unknown>): Promise<DomainError> => {
  const error = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(DomainError);
  return error as DomainError;
};

describe.skipIf(office === undefined)('the LibreOffice converter', () => {
  it('converts one document at a time and refuses beyond its queue with a retry delay', async () => {
    const c = converter({ queueLimit: 1 });
    const results = await Promise.allSettled([0, 1, 2, 3].map((i) => c.convert(html(`doc ${String(i)}`), 'html-text', 'docx')));
    const done = results.filter((r) => r.status === 'fulfilled');
    const busy = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as DomainError);
    expect(done.length).toBe(2);
    expect(busy.map((e) => [e.code, e.httpStatus])).toEqual([
      ['FORMATTER.RENDERER_BUSY', 503],
      ['FORMATTER.RENDERER_BUSY', 503],
    ]);
    expect(busy[0]?.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(partText((done[0] as PromiseFulfilledResult<Uint8Array>).value, 'word/document.xml')).toContain('doc 0');
  });

  it('stops a document past its time limit (503) and starts fresh processes for the next', async () => {
    const c = converter({ timeoutMs: 1 });
    const e = await failure(c.convert(html('slow'), 'html-text', 'odt'));
    expect([e.code, e.httpStatus, e.retryAfterSeconds]).toEqual(['FORMATTER.RENDER_TIMEOUT', 503, 1]);
    expect(c.starts).toBe(1);
    await failure(c.convert(html('slow again'), 'html-text', 'odt'));
    expect(c.starts).toBe(2);
  });

  it('starts a fresh soffice after a crash, and the next document converts', async () => {
    const c = converter();
    expect(partText(await c.convert(html('before'), 'html-text', 'docx'), 'word/document.xml')).toContain('before');
    const pid = await c.processId();
    process.kill(-(pid as number), 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(partText(await c.convert(html('after the crash'), 'html-text', 'docx'), 'word/document.xml')).toContain('after the crash');
    expect(c.starts).toBe(2);
    expect(await c.processId()).not.toBe(pid);
  });
});
