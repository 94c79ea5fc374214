// E-mail through nodemailer to SMTP_URL (smtp:// or smtps://, with credentials in the URL). Its
// failures are sorted for the dispatcher: an SMTP 4xx answer, a timeout or a connection that
// fails are transient (tried again later), a 5xx answer is permanent. Connections are pooled
// (nodemailer's pool: up to 5, each reused for up to 100 messages) unless SMTP_URL says `pool=false`.

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
    // Pooled connections (up to 5, each for up to 100 messages): a new SMTP connection per mail
    // cost about 105 ms against a local server, a pooled one 2-14 ms.
    if (!url.searchParams.has('pool')) url.searchParams.set('pool', 'true');
    this.#transport = nodemailer.createTransport(url.toString());
    this.#from = options.from ?? 'notifications@localhost';
  }

  async send(mail: OutgoingMail): Promise<string[]> {
    try {
      const info = (await this.#transport.sendMail({
        messageId: mail.messageId,
        from: mail.from ?? this.#from,
        to: [...mail.to],
        subject: mail.subject,
        html: mail.html,
        attachments: mail.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: Buffer.from(a.content) })),
      })) as { rejected?: (string | { address: string })[] };
      return (info.rejected ?? []).map((r) => (typeof r === 'string' ? r : r.address));
    } catch (error) {
      // Recorded on the notification, which viewers read: the code and its class, never the
      // server's own words (they may name internal hosts).
      const e = error as { responseCode?: number; code?: string };
      if (typeof e.responseCode === 'number') {
        const transient = e.responseCode < 500;
        throw new DeliveryFailed(
          `SMTP ${String(e.responseCode)}: ${transient ? 'the server asked to try again later' : 'the server refused the message'}`,
          transient,
        );
      }
      throw new DeliveryFailed(
        `SMTP ${e.code ?? 'error'}: the mail server could not be reached or did not answer`,
        e.code === undefined || TRANSIENT_CODES.has(e.code),
      );
    }
  }

  close(): Promise<void> {
    this.#transport.close();
    return Promise.resolve();
  }
}
