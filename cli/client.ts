// The CLI's one way to the service: base URL and bearer token, JSON in and out, and every failure
// turned into a CliError carrying one line for stderr and an exit code by kind.

import { EXIT, CliError } from './output.ts';

export type Connection = { url: string; token: string };

export type Query = Record<string, string | number | boolean | undefined>;

export type RequestOptions = {
  method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  query?: Query;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as it is, with its own headers (a multipart upload). */
  body?: { stream: ReadableStream<Uint8Array>; headers: Record<string, string> };
  headers?: Record<string, string>;
  signal?: AbortSignal;
};

/** The service's error body (API.md "Error body"); `code` names the catalogue entry. */
type ErrorBody = { status?: unknown; code?: unknown; message?: unknown; errors?: unknown };

export class ApiClient {
  readonly base: string;
  readonly #token: string;

  constructor(connection: Connection) {
    this.base = connection.url.replace(/\/+$/, '');
    this.#token = connection.token;
  }

  url(path: string, query: Query = {}): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
    const qs = params.toString();
    return `${this.base}${path}${qs === '' ? '' : `?${qs}`}`;
  }

  /** The response of a successful request (2xx); a CliError for anything else. */
  async send(path: string, options: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}`, ...options.headers };
    let body: string | ReadableStream<Uint8Array> | undefined;
    if (options.json !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.json);
    } else if (options.body !== undefined) {
      Object.assign(headers, options.body.headers);
      body = options.body.stream;
    }
    const target = this.url(path, options.query);
    let response: Response;
    try {
      // duplex 'half': a streamed upload, which undici requires to be said.
      const init: RequestInit & { duplex?: 'half' } = {
        method: options.method ?? (body === undefined ? 'GET' : 'POST'),
        headers,
        ...(body === undefined ? {} : { body, duplex: 'half' }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      };
      response = await fetch(target, init);
    } catch (error) {
      throw unreachable(this.base, error);
    }
    if (!response.ok) throw await httpError(response);
    return response;
  }

  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the shape it reads; the server's response schema is the check
  async json<T>(path: string, options: RequestOptions = {}): Promise<{ body: T; headers: Headers; status: number }> {
    const response = await this.send(path, options);
    const text = await readText(response, this.base);
    const { headers, status } = response;
    if (text === '') return { body: undefined as T, headers, status };
    try {
      return { body: JSON.parse(text) as T, headers, status };
    } catch {
      throw new CliError(`${this.base} answered ${String(response.status)} with a body that is not JSON`, EXIT.server);
    }
  }
}

/** The body's bytes as they arrive. */
export async function* chunksOf(response: Response): AsyncGenerator<Uint8Array> {
  const body = response.body as ReadableStream<Uint8Array> | null;
  if (body !== null) yield* body;
}

async function readText(response: Response, base: string): Promise<string> {
  try {
    return await response.text();
  } catch (error) {
    throw unreachable(base, error);
  }
}

/** `cannot reach http://…: ECONNREFUSED`: the deepest cause's code, which says what went wrong. */
export function unreachable(base: string, error: unknown): CliError {
  let cause: unknown = error;
  let reason = error instanceof Error ? error.message : String(error);
  while (cause instanceof Error) {
    const code = (cause as Error & { code?: unknown }).code;
    if (typeof code === 'string') reason = code;
    else if (cause !== error) reason = cause.message;
    cause = cause.cause;
  }
  return new CliError(`cannot reach ${base}: ${reason}`, EXIT.network);
}

/** `401 AUTH.UNAUTHORIZED: message (first detail line)` from the error body, or the bare status. */
async function httpError(response: Response): Promise<CliError> {
  let body: ErrorBody = {};
  try {
    body = (await response.json()) as ErrorBody;
  } catch {
    // Not the service's error body (a proxy's page): the status line says enough.
  }
  const code = typeof body.code === 'string' ? body.code : typeof body.status === 'string' ? body.status : response.statusText;
  const message = typeof body.message === 'string' ? body.message : '';
  // Detail lines the message already says (`(body): <the message>`) are left out.
  const details = (Array.isArray(body.errors) ? body.errors : []).filter(
    (e): e is string => typeof e === 'string' && !message.startsWith(e.replace(/^[^:]*: /, '').replace(/ \(UTF-8\)/, '')),
  );
  const detail = details.length === 0 ? '' : ` (${details.slice(0, 3).join('; ')}${details.length > 3 ? '; …' : ''})`;
  return new CliError(`${String(response.status)} ${code}${message === '' ? '' : `: ${message}`}${detail}`, EXIT.server, response.status);
}
