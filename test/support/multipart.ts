// A multipart/form-data body with one file field, as an import takes it.

import { randomUUID } from 'node:crypto';

export function multipart(content: string | Buffer, field = 'file'): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----test${randomUUID()}`;
  const payload = Buffer.concat([
    Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="export.json"\r\nContent-Type: application/json\r\n\r\n`,
    ),
    Buffer.isBuffer(content) ? content : Buffer.from(content),
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { payload, headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}
