// SMS through an HTTP gateway (SMS_GATEWAY_URL, optional SMS_GATEWAY_TOKEN). One request per SMS:
//
//   POST <SMS_GATEWAY_URL>
//   Content-Type: application/json
//   Accept: application/json
//   User-Agent: admin-notifications
//   Idempotency-Key: <messageId>
//   Authorization: Bearer <SMS_GATEWAY_TOKEN>        (only when the token is set)
//   Connection: close                                 (a connection per SMS)
//
//   { "messageId": "<the notification's id>", "to": ["+33612345678", ...], "text": "<the text>" }
//
// `messageId` (also the Idempotency-Key) is the same on every attempt of one notification, so the
// gateway can drop a repeat; `to` holds the recipients' phone numbers as the notification gives
// them (not reformatted here); `text` is the rendered text, UTF-8, for the gateway to split as it
// must. The answer: any 2xx means the gateway took the SMS (its body is not read). A 5xx, 408 or
// 429, no answer status within the time limit (default 10 s), or a connection refused, reset or otherwise
// failed is DeliveryFailed(transient: true), tried again later; any other status (a 4xx, and a
// 3xx: redirects are not followed) is DeliveryFailed(transient: false). The message names the
// status or the kind of failure, never the gateway's body or the token: it is recorded on the
// notification, which viewers read.
//
// The URL is the operator's configuration, not user data, so it does not go through the guarded
// outbound client (infra/http/guardedClient.ts): a gateway on a private address is expected.

import http from 'node:http';
import https from 'node:https';
import { DeliveryFailed, type OutgoingSms, type SmsSender } from '../../domain/ports.ts';

export type HttpSmsGatewayOptions = {
  /** SMS_GATEWAY_URL: http: or https:. */
  url: string;
  /** SMS_GATEWAY_TOKEN, sent as `Authorization: Bearer <token>` when given. */
  token?: string;
  /** Time limit of one request until the answer's status; default 10000. */
  timeoutMs?: number;
};

export const DEFAULT_SMS_TIMEOUT_MS = 10_000;

const TRANSIENT_STATUSES = new Set([408, 429]);

export class HttpSmsGateway implements SmsSender {
  readonly #url: URL;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;

  constructor(options: HttpSmsGatewayOptions) {
    const url = URL.parse(options.url);
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
      throw new RangeError('SMS_GATEWAY_URL must be an http: or https: URL');
    if (url.username || url.password) throw new RangeError('SMS_GATEWAY_URL must not carry credentials: set SMS_GATEWAY_TOKEN');
    if (options.token !== undefined && !/^[\x21-\x7e]+$/.test(options.token))
      throw new RangeError('SMS_GATEWAY_TOKEN must be printable ASCII without spaces');
    this.#url = url;
    this.#token = options.token;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_SMS_TIMEOUT_MS;
  }

  async send(sms: OutgoingSms): Promise<void> {
    if (!/^[\x21-\x7e]{1,255}$/.test(sms.messageId))
      throw new DeliveryFailed('SMS gateway: the message id cannot be sent as an Idempotency-Key', false);
    const body = Buffer.from(JSON.stringify({ messageId: sms.messageId, to: [...sms.to], text: sms.text }), 'utf8');
    const signal = AbortSignal.timeout(this.#timeoutMs);
    let status: number;
    try {
      status = await this.#post(body, sms.messageId, signal);
    } catch (error) {
      throw this.#failure(error, signal);
    }
    if (status >= 200 && status < 300) return;
    throw statusFailure(status);
  }

  /** The answer's status; its body is not read. A connection of its own per SMS (no keep-alive:
   * a pooled connection the gateway closed meanwhile would fail a POST that cannot be replayed). */
  #post(body: Buffer, messageId: string, signal: AbortSignal): Promise<number> {
    const url = this.#url;
    const secure = url.protocol === 'https:';
    return new Promise<number>((done, fail) => {
      const req = (secure ? https : http).request(
        {
          hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
          port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          headers: { ...this.#headers(messageId), 'content-length': String(body.length) },
          agent: false,
          signal,
        },
        (response) => {
          done(response.statusCode ?? 0);
          response.destroy();
        },
      );
      req.on('error', fail);
      req.end(body);
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  #headers(messageId: string): Record<string, string> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json',
      'user-agent': 'admin-notifications',
      'idempotency-key': messageId,
    };
    if (this.#token !== undefined && this.#token !== '') headers.authorization = `Bearer ${this.#token}`;
    return headers;
  }

  #failure(error: unknown, signal: AbortSignal): DeliveryFailed {
    if (signal.aborted) return new DeliveryFailed(`SMS gateway timed out after ${this.#timeoutMs} ms`, true);
    const code = (error as { code?: unknown } | null)?.code;
    const named = typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? code : 'error';
    return new DeliveryFailed(`SMS gateway ${named}: the gateway could not be reached or did not answer`, true);
  }
}

function statusFailure(status: number): DeliveryFailed {
  if (status >= 300 && status < 400) return new DeliveryFailed(`SMS gateway HTTP ${status}: redirect not followed`, false);
  if (status >= 500 || TRANSIENT_STATUSES.has(status))
    return new DeliveryFailed(`SMS gateway HTTP ${status}: the gateway asked to try again later`, true);
  return new DeliveryFailed(`SMS gateway HTTP ${status}: the gateway refused the message`, false);
}
