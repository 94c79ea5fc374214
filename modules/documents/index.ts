// Documents: templates (handlebars, jsonata, office files) rendered to HTML, PDF and office formats
// at /api/v1/formatter, on two lanes of template threads (interactive and service) with a share per
// caller. Formatter templates themselves are a registry (modules/registries/).

import type { Module } from '../../api/module.ts';
import { formatterRoutes } from './api/formatter.ts';

export const documentsModule: Module = { name: 'documents', routes: formatterRoutes };
