import { z } from 'zod';
import { code, jsonMap, stringList, text, uuid } from '../../../domain/shared/fields.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { handlebarsProblems, jsonataProblems } from '../../documents/domain/templates.ts';
import { fileTemplateProblems } from '../../documents/domain/fileTemplates.ts';

export const InputTypes = ['FILE', 'HTML', 'SCRIPT'] as const;
export const DocumentTypes = ['PDF', 'EMAIL', 'SOURCE'] as const;
export const DocumentSizes = ['AUTO', 'PORTRAIT', 'LANDSCAPE', 'A4', 'B5', 'LETTER'] as const;

export const formatterTemplate = defineRegistry({
  name: 'FormatterTemplate',
  events: {
    FormatterTemplateCreated: created(),
    FormatterTemplateReplaced: replaced(),
    FormatterTemplatePatched: patched(),
    FormatterTemplateDeleted: deleted(),
  },
  path: 'formatter-templates',
  description:
    'Document template rendered to HTML, PDF or office formats from a template plus data. HTML templates are handlebars (escaping HTML; helpers ' +
    'formatDate, formatNumber, eq, default, join, upper, lower; no partials, decorators or lookups); SCRIPT templates are a JSONata expression ' +
    'evaluated over the data (never run as code) whose text result is the document source; FILE templates are a DOCX, XLSX, ODT or ODS file in base64 ' +
    'whose `{{placeholders}}` are filled from the data (a DOCX by docxtemplater: `{{name}}`, `{{#list}}…{{/list}}` loops, `{{^x}}…{{/x}}` when ' +
    'empty; an XLSX cell by cell, each text cell a handlebars template; ODT and ODS through DOCX and XLSX). ' +
    '`content` is checked when saved: a template that does not compile is a 400 naming its line and column (or, for a FILE, the placeholder). ' +
    "A FILE that would have a reader's office suite read from outside it (linked images, INCLUDETEXT/INCLUDEPICTURE and other fetching fields, " +
    'a remote attached template, data connections, links to other workbooks, DDE) is a 400 naming the part; hyperlinks to http(s) and mailto stay.',
  fields: z.strictObject({
    code: code(),
    name: text().optional(),
    inputType: z.enum(InputTypes),
    documentType: z.enum(DocumentTypes).optional(),
    documentSize: z.enum(DocumentSizes).optional(),
    content: z
      .string()
      .max(500_000)
      .optional()
      .meta({
        description:
          'The template text: at most 500,000 characters, and the whole record at most 512 KiB of JSON (UTF-8), so that every version fits one event of either log.',
      }),
    previewData: jsonMap().optional(),
    formId: uuid().optional(),
    dataTags: stringList().optional(),
  }),
  rules: [
    (f) => {
      if (typeof f.content !== 'string') return [];
      if (f.inputType === 'HTML') return handlebarsProblems(f.content);
      return f.inputType === 'SCRIPT' ? jsonataProblems(f.content) : fileTemplateProblems(f.content);
    },
  ],
});
