// Attachments of a notification: at most MAX_ATTACHMENTS, each at most MAX_ATTACHMENT_BYTES once
// decoded (413 beyond), and each of a type its bytes prove (a "PDF" must begin as a PDF): the bytes
// go to the blob store and the notification keeps only their reference.

import { DomainError } from '../../../domain/shared/errors.ts';
import { isBase64 } from '../../../domain/shared/fields.ts';

export const MAX_ATTACHMENTS = 10;
export const MAX_ATTACHMENT_BYTES = 4 * 1024 * 1024;

const ZIP_TYPES = [
  'application/zip',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  'application/vnd.oasis.opendocument.text',
  'application/vnd.oasis.opendocument.spreadsheet',
];
const OLE_TYPES = ['application/msword', 'application/vnd.ms-excel', 'application/vnd.ms-powerpoint'];
const TEXT_TYPES = ['text/plain', 'text/csv', 'text/calendar', 'application/json'];

const startsWith = (bytes: Uint8Array, hex: string): boolean => Buffer.from(bytes.subarray(0, hex.length / 2)).toString('hex') === hex;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Whether the bytes are what the declared media type says (its parameters ignored). */
function proves(type: string, bytes: Uint8Array): boolean {
  if (type === 'application/octet-stream') return true;
  if (type === 'application/pdf') return startsWith(bytes, '255044462d');
  if (type === 'image/png') return startsWith(bytes, '89504e470d0a1a0a');
  if (type === 'image/jpeg') return startsWith(bytes, 'ffd8ff');
  if (type === 'image/gif') return startsWith(bytes, '474946383');
  if (ZIP_TYPES.includes(type)) return startsWith(bytes, '504b0304');
  if (OLE_TYPES.includes(type)) return startsWith(bytes, 'd0cf11e0a1b11ae1');
  if (TEXT_TYPES.includes(type)) {
    try {
      return !utf8.decode(bytes).includes('\u0000');
    } catch {
      return false;
    }
  }
  return false;
}

export const ATTACHMENT_TYPES = [
  'application/pdf',
  'image/png',
  'image/jpeg',
  'image/gif',
  ...ZIP_TYPES,
  ...OLE_TYPES,
  ...TEXT_TYPES,
  'application/octet-stream',
];

export type AttachmentInput = { name: string; mimeType: string; data: string };

/** The bytes of each attachment, checked: count and size (413), base64 and type (422). */
export function checkedAttachments(attachments: readonly AttachmentInput[]): { name: string; mimeType: string; bytes: Uint8Array }[] {
  if (attachments.length > MAX_ATTACHMENTS) {
    throw new DomainError(
      'NOTIFICATION.TOO_MANY_ATTACHMENTS',
      `At most ${String(MAX_ATTACHMENTS)} attachments, got ${String(attachments.length)}`,
    );
  }
  return attachments.map((a, i) => {
    const field = `attachments[${String(i)}]`;
    const compact = a.data.replace(/\s+/g, '');
    if (!isBase64(compact)) {
      throw new DomainError('NOTIFICATION.ATTACHMENT_INVALID', `Attachment ${JSON.stringify(a.name)} is not base64`, [
        `${field}.data: expected base64`,
      ]);
    }
    const bytes = new Uint8Array(Buffer.from(compact, 'base64'));
    if (bytes.byteLength > MAX_ATTACHMENT_BYTES) {
      throw new DomainError(
        'NOTIFICATION.ATTACHMENT_TOO_LARGE',
        `Attachment ${JSON.stringify(a.name)} is ${String(bytes.byteLength)} bytes; at most ${String(MAX_ATTACHMENT_BYTES)}`,
      );
    }
    const type = (a.mimeType.split(';')[0] ?? '').trim().toLowerCase();
    if (!ATTACHMENT_TYPES.includes(type)) {
      throw new DomainError('NOTIFICATION.ATTACHMENT_INVALID', `Attachments of type ${JSON.stringify(type)} are not accepted`, [
        `${field}.mimeType: one of ${ATTACHMENT_TYPES.join(', ')}`,
      ]);
    }
    if (!proves(type, bytes)) {
      throw new DomainError('NOTIFICATION.ATTACHMENT_INVALID', `Attachment ${JSON.stringify(a.name)} is not ${type} by its bytes`, [
        `${field}.data: its bytes are not ${type}`,
      ]);
    }
    return { name: a.name, mimeType: type, bytes };
  });
}
