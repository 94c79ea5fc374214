// E-mail through nodemailer to SMTP_URL (smtp:// or smtps://, with credentials in the URL). Its
// failures are sorted for the dispatcher: an SMTP 4xx answer, a timeout or a connection that
// fails are transient (tried again later), a 5xx answer is permanent.

import nodemailer, { type Transporter } from 'nodemailer';
import { DeliveryFailed, type MailSender, type OutgoingMail } from '../../domain/ports.ts';

export type SmtpOptions = { url: string; from?: string; timeoutMs?: number };

const TRANSIENT_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'ECONNREFUSED', 'ECONNRESET', 'EENVELOPE_TEMP']);

export class SmtpMailSender implements MailSender {
  readonly #transport: Transporter;
  readonly #from: string;

  constructor(options: SmtpOptions) {
    const timeout = options.timeoutMs ?? 15_000;
    const url = new URL(options.url);
    url.searchParams.set('connectionTimeout', String(timeout));
    url.searchParams.set('greetingTimeout', String(timeout));
    url.searchParams.set('socketTimeout', String(timeout));
    this.#transport = nodemailer.createTransport(url.toString());
    this.#from = options.from ?? 'notifications@localhost';
  }

  async send(mail: OutgoingMail): Promise<void> {
    try {
      await this.#transport.sendMail({
        messageId: mail.messageId,
        from: mail.from ?? this.#from,
        to: [...mail.to],
        subject: mail.subject,
        html: mail.html,
        attachments: mail.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: Buffer.from(a.content) })),
      });
    } catch (error) {
      const e = error as { responseCode?: number; code?: string; response?: string; message?: string };
      const answer = e.response ?? e.message ?? String(error);
      if (typeof e.responseCode === 'number') throw new DeliveryFailed(`SMTP ${String(e.responseCode)}: ${answer}`.slice(0, 500), e.responseCode < 500);
      throw new DeliveryFailed(`SMTP ${e.code ?? 'error'}: ${answer}`.slice(0, 500), e.code === undefined || TRANSIENT_CODES.has(e.code));
    }
  }

  close(): Promise<void> {
    this.#transport.close();
    return Promise.resolve();
  }
}
