// Validation of request parts with zod, through fastify's schema compiler, so each failure keeps
// its zod issues and becomes one error line per violated field.

import type { FastifySchemaCompiler } from 'fastify';
import type { z } from 'zod';
import { RequestValidationError } from './errorHandler.ts';

export const validatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data) => {
    const result = schema.safeParse(data);
    if (result.success) return { value: result.data };
    return { error: new RequestValidationError(httpPart ?? 'body', result.error.issues, data) };
  };
