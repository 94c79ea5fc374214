// Documents: templates (handlebars, jsonata, office files) rendered to HTML, PDF and office formats
// at /api/v1/formatter, on two lanes of template threads (interactive and service) with a share per
// caller. Formatter templates themselves are a registry (modules/registries/).
export { documentsModule } from './api/formatter.ts';
