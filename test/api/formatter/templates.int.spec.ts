// The formatter's template engine over HTTP: templates refused when saved (line and column), the
// preview (escaped HTML, the helpers), renders of stored HTML and SCRIPT templates, and what a
// template cannot reach (prototypes, partials, lookups, code).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { base64, docxOf, para } from '../../support/office.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

type ErrorBody = { code: string; errors: string[] };
const template = (payload: Record<string, unknown>) => t.call({ method: 'POST', url: '/api/v1/formatter-templates', payload });
const preview = (content: string, data: unknown = {}) =>
  t.call({ method: 'POST', url: '/api/v1/formatter/preview', payload: { content, data }, as: 'viewer' });

describe('templates are checked when saved', () => {
  it('refuses an HTML template that does not compile, naming line and column (400)', async () => {
    const res = await template({ code: 'BROKEN', inputType: 'HTML', content: 'Dear {{name}},\n{{#if paid}}thanks{{/each}}' });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().errors).toEqual(["content: line 2, column 4: if doesn't match each"]);
    const unclosed = await template({ code: 'BROKEN', inputType: 'HTML', content: 'Hello {{name}' });
    expect(unclosed.json<ErrorBody>().errors[0]).toMatch(/^content: line 1, column 13: Expecting /);
    const partial = await template({ code: 'BROKEN', inputType: 'HTML', content: 'a {{> other}}' });
    expect(partial.json<ErrorBody>().errors).toEqual(['content: line 1, column 3: partials are not available']);
  });

  it('refuses a SCRIPT template that does not parse, and notification templates that do not compile', async () => {
    const res = await template({ code: 'BADSCRIPT', inputType: 'SCRIPT', content: '"a" & (\n  name' });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().errors[0]).toMatch(/^content: line 2, column \d+: /);
    const note = await t.call({
      method: 'POST',
      url: '/api/v1/notification-templates',
      payload: { code: 'N1', name: 'n', configTypeId: '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5', subject: 'Ticket {{code', content: 'ok' },
    });
    expect(note.statusCode).toBe(400);
    expect(note.json<ErrorBody>().errors[0]).toMatch(/^subject: line 1, column \d+: /);
  });
});

describe('preview', () => {
  it('renders escaped HTML with the helpers', async () => {
    const res = await preview(
      '<p>{{name}}</p><p>{{formatDate at "Europe/Prague" "en-GB" dateStyle="long" timeStyle="short"}}</p><p>{{formatNumber total "de-DE" minimumFractionDigits=2}}</p>' +
        '<p>{{#if (eq status "PAID")}}paid{{/if}} {{default note "none"}} {{join tags "/"}} {{upper name}} {{lower "ABC"}}</p>',
      { name: '<b>Ann & Co</b>', at: '2026-11-23T10:00:00Z', total: 1234.5, status: 'PAID', tags: ['a', 'b'] },
    );
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.body).toBe(
      '<p>&lt;b&gt;Ann &amp; Co&lt;/b&gt;</p><p>23 November 2026 at 11:00</p><p>1.234,50</p><p>paid none a/b &lt;B&gt;ANN &amp; CO&lt;/B&gt; abc</p>',
    );
  });

  it('reaches nothing but the data: no prototypes, no lookups, no unknown helpers', async () => {
    const res = await preview('[{{constructor}}][{{__proto__}}][{{name.constructor}}][{{#with this}}{{constructor.name}}{{/with}}]', {
      name: 'x',
    });
    expect(res.body).toBe('[][][][]');
    expect((await preview('{{lookup this "constructor"}}')).statusCode).toBe(400);
    expect((await preview('{{log "x"}}')).statusCode).toBe(400);
    expect((await preview('{{process.env.HOME}}')).body).toBe('');
    const badZone = await preview('{{formatDate at "Mars/Olympus"}}', { at: '2026-01-01T00:00:00Z' });
    expect(badZone.statusCode).toBe(422);
    expect(badZone.json<ErrorBody>().code).toBe('FORMATTER.RENDER_FAILED');
  });
});

describe('render a stored template', () => {
  it('renders HTML as text/html, SOURCE as text/plain unescaped, with the template version; 404 for an unknown code', async () => {
    await template({ code: 'GREET', inputType: 'HTML', content: '<h1>Hello {{name}}</h1>' });
    const html = await t.call({ method: 'POST', url: '/api/v1/formatter/templates/GREET/render', payload: { name: 'A&B' }, as: 'viewer' });
    expect(html.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(html.body).toBe('<h1>Hello A&amp;B</h1>');
    expect(html.headers['x-template-version']).toBe('0');
    await t.call({ method: 'PATCH', url: '/api/v1/formatter-templates/GREET', payload: { content: '<h2>Hi {{name}}</h2>' } });
    const changed = await t.call({ method: 'POST', url: '/api/v1/formatter/templates/GREET/render', payload: { name: 'C' } });
    expect([changed.body, changed.headers['x-template-version']]).toEqual(['<h2>Hi C</h2>', '1']);
    // An older version renders as it stood, byte for byte the same each time.
    const old = await t.call({
      method: 'POST',
      url: '/api/v1/formatter/templates/GREET/render?templateVersion=0',
      payload: { name: 'A&B' },
    });
    expect([old.body, old.headers['x-template-version'], old.headers.etag]).toEqual([html.body, '0', html.headers.etag]);
    expect(String(html.headers.etag)).toMatch(/^"[0-9a-f]{64}"$/);
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/formatter/templates/GREET/render?templateVersion=7', payload: {} })).statusCode,
    ).toBe(404);
    await template({ code: 'SRC', inputType: 'HTML', documentType: 'SOURCE', content: 'id={{id}};name={{name}}' });
    const src = await t.call({ method: 'POST', url: '/api/v1/formatter/templates/SRC/render', payload: { id: 7, name: 'A&B' } });
    expect([src.headers['content-type'], src.body]).toEqual(['text/plain; charset=utf-8', 'id=7;name=A&B']);
    expect((await t.call({ method: 'POST', url: '/api/v1/formatter/templates/NOPE/render', payload: {} })).statusCode).toBe(404);
  });

  it('evaluates a SCRIPT template as JSONata (text results only, bounded), never as code', async () => {
    await template({ code: 'SUM', inputType: 'SCRIPT', content: '"Total: " & $string($sum(items.price))' });
    const sum = await t.call({
      method: 'POST',
      url: '/api/v1/formatter/templates/SUM/render',
      payload: { items: [{ price: 2 }, { price: 3 }] },
    });
    expect(sum.body).toBe('Total: 5');
    await template({ code: 'NUM', inputType: 'SCRIPT', content: '1 + 1' });
    expect((await t.call({ method: 'POST', url: '/api/v1/formatter/templates/NUM/render', payload: {} })).statusCode).toBe(422);
    await template({ code: 'LOOP', inputType: 'SCRIPT', content: '($f := function($n) { $f($n + 1) }; $f(0))' });
    const loop = await t.call({ method: 'POST', url: '/api/v1/formatter/templates/LOOP/render', payload: {} });
    expect(loop.statusCode).toBe(422);
    await template({ code: 'CODE', inputType: 'SCRIPT', content: '$eval("process.exit(1)")' });
    expect((await t.call({ method: 'POST', url: '/api/v1/formatter/templates/CODE/render', payload: {} })).statusCode).toBe(422);
    await template({ code: 'FILETPL', inputType: 'FILE', content: base64(docxOf(para('Hello {{name}}'))) });
    expect((await t.call({ method: 'POST', url: '/api/v1/formatter/templates/FILETPL/render', payload: {} })).statusCode).toBe(422);
  });
});
