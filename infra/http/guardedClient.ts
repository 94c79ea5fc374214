// The one guarded client for outbound URLs (notification rules' evalNotificationUrl): a GET that
// answers parsed JSON, or throws OutboundFailed with a short message fit to record on a trigger
// (a status code or a kind of failure, never the remote body).
//
// - Only http: and https:. A URL with credentials (user:password@) is refused: nothing of the
//   service's is ever sent. Headers sent: `Accept: application/json`,
//   `Accept-Encoding: identity`, `User-Agent: admin-notifications`; no cookie, no authorization.
// - The host is resolved first (IP literals as they are; the WHATWG URL parser has already turned
//   `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1` into 127.0.0.1), every address is checked, and
//   the connection goes only to the checked addresses: they are handed to http.request through its
//   `lookup` option, so the host is not resolved again and a DNS answer that changes between the
//   check and the connect (rebinding) changes nothing. One address refused refuses the URL.
// - Refused unless allow-listed: loopback (127/8, ::1), unspecified (0/8, ::), private (10/8,
//   172.16/12, 192.168/16, fc00::/7, fec0::/10), link-local (169.254/16 with the 169.254.169.254
//   metadata service, fe80::/10), shared carrier-grade NAT (100.64/10), multicast (224/4,
//   ff00::/8), broadcast and reserved (240/4, 192.0.0/24, the documentation and benchmarking
//   ranges, 64:ff9b:1::/48, 2001::/23, 2001:db8::/32, 3fff::/20, any IPv6 outside 2000::/3).
//   IPv4 inside IPv6 is judged by the IPv4 address it carries: IPv4-mapped (::ffff:a.b.c.d, which
//   is then treated as the IPv4 address itself), IPv4-compatible (::a.b.c.d), SIIT
//   (::ffff:0:a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002::/16). Teredo (2001::/32) is
//   reserved. A NAT64 or a tunnel under a network-specific prefix cannot be told from a public
//   address: that one is the network's to filter.
// - Allow list (OUTBOUND_ALLOW, comma-separated; allowListFrom splits it): each entry is a CIDR
//   (`10.1.0.0/16`, `fd00::/8`, `::1/128`), a single IP (`127.0.0.1`, `::1`, as /32 or /128), or a
//   host name (`localhost`, `metrics.internal`: the URL's host exactly, case-insensitive, no
//   wildcard; the name is still resolved, and every address it resolves to is accepted). Write
//   IPv4 ranges in dotted form; an IPv4-mapped IPv6 entry is read as the IPv4 one. An entry that is
//   none of these throws a RangeError when the client is made. An allowed IPv4 address does not
//   allow the NAT64 or 6to4 forms that embed it.
// - Redirects are never followed: a 3xx answer is a failure ("HTTP 302: redirect not followed"),
//   so the check above is the only one a request ever needs.
// - One time limit (default 5 s) covers resolving, connecting and the whole body. The body is
//   counted as it arrives (default limit 1 MiB), whatever Content-Length says, and the request is
//   cut beyond it. A compressed answer (a Content-Encoding other than identity) is refused, so no
//   decompression runs. No agent, no keep-alive, no proxy: each request opens its own connection.

import { promises as dns, type LookupAddress } from 'node:dns';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, isIPv4, isIPv6, type LookupFunction } from 'node:net';
import { OutboundFailed, type OutboundClient } from '../../domain/ports.ts';

/** Resolves a host name to all its addresses (default: dns.lookup with `all: true`). */
export type OutboundLookup = (hostname: string) => Promise<readonly { address: string; family: number }[]>;

export type GuardedClientOptions = {
  /** CIDRs, IPs or host names whose addresses are accepted though they would be refused. */
  allow?: readonly string[];
  /** Time limit of one request, resolving and reading the body included; default 5000. */
  timeoutMs?: number;
  /** Largest body accepted, in bytes as they arrive; default 1 MiB. */
  maxBytes?: number;
  lookup?: OutboundLookup;
};

export const DEFAULT_TIMEOUT_MS = 5_000;
export const DEFAULT_MAX_BYTES = 1024 * 1024;

// ---------------------------------------------------------------- addresses

export type AddressKind = 'loopback' | 'unspecified' | 'private' | 'link-local' | 'shared' | 'multicast' | 'broadcast' | 'reserved';

/** Why an address is refused; `via` names the IPv4 address an IPv6 one carries, when that decided. */
export type AddressRefusal = { kind: AddressKind; via?: string };

type Ip = { family: 4 | 6; bytes: number[] };

function parseIPv4(text: string): number[] | undefined {
  return isIPv4(text) ? text.split('.').map(Number) : undefined;
}

function parseIPv6(input: string): number[] | undefined {
  let text = input.replace(/%.*$/, ''); // a zone (fe80::1%eth0) names an interface, not an address
  if (!isIPv6(text)) return undefined;
  const lastColon = text.lastIndexOf(':');
  const v4 = parseIPv4(text.slice(lastColon + 1));
  if (v4) text = `${text.slice(0, lastColon + 1)}${hex16(v4[0], v4[1])}:${hex16(v4[2], v4[3])}`;
  const [head = '', tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.flatMap((group) => {
    const value = parseInt(group, 16);
    return [value >> 8, value & 0xff];
  });
}

function hex16(high = 0, low = 0): string {
  return ((high << 8) | low).toString(16);
}

/** The address, with an IPv4-mapped IPv6 one (::ffff:a.b.c.d) read as the IPv4 one it maps. */
function parseIp(text: string): Ip | undefined {
  const v4 = parseIPv4(text);
  if (v4) return { family: 4, bytes: v4 };
  const v6 = parseIPv6(text);
  if (!v6) return undefined;
  if (startsWith(v6, MAPPED, 96)) return { family: 4, bytes: v6.slice(12) };
  return { family: 6, bytes: v6 };
}

function formatIp(ip: Ip): string {
  if (ip.family === 4) return ip.bytes.join('.');
  const groups = Array.from({ length: 8 }, (_, i) => hex16(ip.bytes[2 * i], ip.bytes[2 * i + 1]));
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1); // the canonical form: fe80::1
}

function startsWith(bytes: readonly number[], prefix: readonly number[], bits: number): boolean {
  for (let bit = 0; bit < bits; bit += 8) {
    const mask = bits - bit >= 8 ? 0xff : (0xff << (8 - (bits - bit))) & 0xff;
    if (((bytes[bit / 8] ?? 0) & mask) !== ((prefix[bit / 8] ?? 0) & mask)) return false;
  }
  return true;
}

function bytesOf(text: string): number[] {
  const bytes = parseIPv4(text) ?? parseIPv6(text);
  if (!bytes) throw new Error(`not an address: ${text}`);
  return bytes;
}

const MAPPED = bytesOf('::ffff:0:0');

type Range = { prefix: number[]; bits: number; kind: AddressKind };
const range = (cidr: string, kind: AddressKind): Range => {
  const [address = '', bits = ''] = cidr.split('/');
  return { prefix: bytesOf(address), bits: Number(bits), kind };
};

// First match wins.
const V4_RANGES: readonly Range[] = [
  range('0.0.0.0/8', 'unspecified'),
  range('10.0.0.0/8', 'private'),
  range('100.64.0.0/10', 'shared'),
  range('127.0.0.0/8', 'loopback'),
  range('169.254.0.0/16', 'link-local'),
  range('172.16.0.0/12', 'private'),
  range('192.0.0.0/24', 'reserved'), // IETF protocol assignments
  range('192.0.2.0/24', 'reserved'), // documentation
  range('192.88.99.0/24', 'reserved'), // 6to4 relay anycast
  range('192.168.0.0/16', 'private'),
  range('198.18.0.0/15', 'reserved'), // benchmarking
  range('198.51.100.0/24', 'reserved'), // documentation
  range('203.0.113.0/24', 'reserved'), // documentation
  range('224.0.0.0/4', 'multicast'),
  range('255.255.255.255/32', 'broadcast'),
  range('240.0.0.0/4', 'reserved'),
];

const V6_RANGES: readonly Range[] = [
  range('::/128', 'unspecified'),
  range('::1/128', 'loopback'),
  range('64:ff9b:1::/48', 'reserved'), // local-use NAT64: the IPv4 address may sit anywhere
  range('2001::/32', 'reserved'), // Teredo
  range('2001:db8::/32', 'reserved'), // documentation
  range('2001::/23', 'reserved'), // IETF protocol assignments
  range('3fff::/20', 'reserved'), // documentation
  range('fc00::/7', 'private'),
  range('fec0::/10', 'private'), // site-local, deprecated
  range('fe80::/10', 'link-local'),
  range('ff00::/8', 'multicast'),
];

// IPv6 prefixes that carry an IPv4 address, where it sits, and whether one that carries a public
// IPv4 address is itself public (NAT64 and 6to4 reach that host; the other two are never routed).
const EMBEDDING: readonly { prefix: number[]; bits: number; at: number; routed: boolean }[] = [
  { prefix: bytesOf('::'), bits: 96, at: 12, routed: false }, // IPv4-compatible (deprecated)
  { prefix: bytesOf('::ffff:0:0:0'), bits: 96, at: 12, routed: false }, // SIIT IPv4-translated
  { prefix: bytesOf('64:ff9b::'), bits: 96, at: 12, routed: true }, // NAT64 well-known prefix (DNS64 answers)
  { prefix: bytesOf('2002::'), bits: 16, at: 2, routed: true }, // 6to4
];
const GLOBAL_UNICAST = bytesOf('2000::');

function classify(ip: Ip): AddressRefusal | undefined {
  const ranges = ip.family === 4 ? V4_RANGES : V6_RANGES;
  const match = ranges.find((r) => startsWith(ip.bytes, r.prefix, r.bits));
  if (match) return { kind: match.kind };
  if (ip.family === 4) return undefined;
  const embedding = EMBEDDING.find((e) => startsWith(ip.bytes, e.prefix, e.bits));
  if (embedding) {
    const v4: Ip = { family: 4, bytes: ip.bytes.slice(embedding.at, embedding.at + 4) };
    const inner = classify(v4);
    if (inner) return { kind: inner.kind, via: formatIp(v4) };
    if (embedding.routed) return undefined;
  }
  return startsWith(ip.bytes, GLOBAL_UNICAST, 3) ? undefined : { kind: 'reserved' };
}

/** Why an IP address (IPv4 or IPv6 text, zone allowed) is refused, or undefined for a public one;
 * a text that is not an IP address is a RangeError. */
export function classifyAddress(address: string): AddressRefusal | undefined {
  const ip = parseIp(address);
  if (!ip) throw new RangeError(`not an IP address: ${address}`);
  return classify(ip);
}

// ---------------------------------------------------------------- allow list

type AllowRule = { host: string } | { net: Ip; bits: number };

/** Splits OUTBOUND_ALLOW (comma-separated, blanks ignored) into entries for `allow`. */
export function allowListFrom(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
}

function allowRule(entry: string): AllowRule {
  const invalid = () => new RangeError(`OUTBOUND_ALLOW: "${entry}" is not a CIDR, an IP address or a host name`);
  const [address = '', bits, extra] = entry
    .trim()
    .replace(/^\[(.*)\]/, '$1')
    .split('/');
  const ip = isIP(address) === 0 ? undefined : parseIp(address);
  if (bits !== undefined || extra !== undefined) {
    if (!ip || extra !== undefined) throw invalid();
    return cidrRule(ip, isIPv6(address), bits ?? '', invalid);
  }
  if (ip) return { net: ip, bits: ip.family === 4 ? 32 : 128 };
  return hostRule(entry.trim(), invalid);
}

function cidrRule(ip: Ip, writtenAsIPv6: boolean, bits: string, invalid: () => RangeError): AllowRule {
  if (!/^\d{1,3}$/.test(bits)) throw invalid();
  const mappedShift = ip.family === 4 && writtenAsIPv6 ? 96 : 0; // ::ffff:10.0.0.0/104 is 10.0.0.0/8
  const prefix = Number(bits) - mappedShift;
  if (prefix < 0 || prefix > (ip.family === 4 ? 32 : 128)) throw invalid();
  return { net: ip, bits: prefix };
}

function hostRule(entry: string, invalid: () => RangeError): AllowRule {
  if (/[:/@?#\s]/.test(entry)) throw invalid(); // a host name alone: no port, path, user or scheme
  let url: URL;
  try {
    url = new URL(`http://${entry}/`);
  } catch {
    throw invalid();
  }
  const ip = parseIp(url.hostname); // `2130706433` is 127.0.0.1
  if (ip) return { net: ip, bits: 32 };
  return { host: url.hostname };
}

function allowed(rules: readonly AllowRule[], hostname: string, ip: Ip): boolean {
  return rules.some((rule) =>
    'host' in rule ? rule.host === hostname : rule.net.family === ip.family && startsWith(ip.bytes, rule.net.bytes, rule.bits),
  );
}

// ---------------------------------------------------------------- the request

type Settings = { rules: readonly AllowRule[]; timeoutMs: number; maxBytes: number; lookup: OutboundLookup };
type Target = { url: URL; hostname: string };
type Checked = { address: string; family: 4 | 6 };

const ARTICLE: Record<AddressKind, string> = {
  loopback: 'a loopback address',
  unspecified: 'an unspecified address',
  private: 'a private address',
  'link-local': 'a link-local address',
  shared: 'a shared (carrier-grade NAT) address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  reserved: 'a reserved address',
};

const defaultLookup: OutboundLookup = (hostname) => dns.lookup(hostname, { all: true, order: 'verbatim' });

export function createGuardedClient(options: GuardedClientOptions = {}): OutboundClient {
  const settings: Settings = {
    rules: (options.allow ?? []).map(allowRule),
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    maxBytes: options.maxBytes ?? DEFAULT_MAX_BYTES,
    lookup: options.lookup ?? defaultLookup,
  };
  return { getJson: (url) => getJson(url, settings) };
}

async function getJson(text: string, settings: Settings): Promise<unknown> {
  const target = parseTarget(text);
  const controller = new AbortController();
  const timer = setTimeout(() => {
    controller.abort();
  }, settings.timeoutMs);
  try {
    const addresses = await untilAborted(resolve(target.hostname, settings.lookup), controller.signal);
    const checked = check(target.hostname, addresses, settings.rules);
    const body = await request(target, checked, settings.maxBytes, controller.signal);
    return parseJson(body);
  } catch (error) {
    if (error instanceof OutboundFailed) throw error;
    if (controller.signal.aborted) throw new OutboundFailed(`timed out after ${settings.timeoutMs} ms`);
    throw networkFailure(error);
  } finally {
    clearTimeout(timer);
  }
}

function parseTarget(text: string): Target {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new OutboundFailed('not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundFailed('refused: only http: and https: URLs are fetched');
  if (url.username || url.password) throw new OutboundFailed('refused: the URL carries credentials, and none are sent');
  return { url, hostname: url.hostname.replace(/^\[(.*)\]$/, '$1') };
}

async function resolve(hostname: string, lookup: OutboundLookup): Promise<readonly { address: string; family: number }[]> {
  if (isIP(hostname) !== 0) return [{ address: hostname, family: isIP(hostname) }];
  try {
    const addresses = await lookup(hostname);
    if (addresses.length === 0) throw Object.assign(new Error('no address'), { code: 'ENOTFOUND' });
    return addresses;
  } catch (error) {
    const code = codeOf(error);
    if (code === 'ENOTFOUND' || code === 'ENODATA') throw new OutboundFailed(`host not found: ${hostname}`);
    throw new OutboundFailed(`could not resolve ${hostname} (${code ?? 'error'})`);
  }
}

function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((done, fail) => {
    const onAbort = () => {
      fail(new Error('aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(done, fail).finally(() => {
      signal.removeEventListener('abort', onAbort);
    });
  });
}

/** Every address, checked; one refused refuses them all. */
function check(hostname: string, addresses: readonly { address: string }[], rules: readonly AllowRule[]): Checked[] {
  const literal = isIP(hostname) !== 0;
  return addresses.map(({ address }) => {
    const ip = parseIp(address);
    if (!ip) throw new OutboundFailed(`refused: ${hostname} resolved to something that is not an IP address`);
    const shown = formatIp(ip);
    const refusal = classify(ip);
    if (refusal && !allowed(rules, hostname.toLowerCase(), ip)) {
      const subject = !literal ? `${hostname} resolves to ${shown},` : shown === hostname ? `${shown} is` : `${hostname} (${shown}) is`;
      const via = refusal.via === undefined ? '' : ` (it carries IPv4 ${refusal.via})`;
      throw new OutboundFailed(`refused: ${subject} ${ARTICLE[refusal.kind]}${via} (allow it in OUTBOUND_ALLOW)`);
    }
    return { address: shown, family: ip.family };
  });
}

/** A lookup that answers the checked addresses, whatever it is asked. */
function pinned(addresses: readonly Checked[]): LookupFunction {
  return (_hostname, options, callback) => {
    const first = addresses[0] as Checked;
    if (options.all === true)
      callback(
        null,
        addresses.map((a): LookupAddress => ({ address: a.address, family: a.family })),
      );
    else callback(null, first.address, first.family);
  };
}

function request(target: Target, addresses: readonly Checked[], maxBytes: number, signal: AbortSignal): Promise<Buffer> {
  const { url, hostname } = target;
  const secure = url.protocol === 'https:';
  return new Promise<Buffer>((done, fail) => {
    const req = (secure ? https : http).request(
      {
        hostname,
        port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
        path: `${url.pathname}${url.search}`,
        method: 'GET',
        headers: { accept: 'application/json', 'accept-encoding': 'identity', 'user-agent': 'admin-notifications' },
        agent: false,
        lookup: pinned(addresses),
        signal,
      },
      (response) => {
        readBody(response, maxBytes).then(done, (error: unknown) => {
          req.destroy();
          fail(error instanceof Error ? error : new Error(String(error)));
        });
      },
    );
    req.on('error', fail);
    req.end();
  });
}

async function readBody(response: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const status = response.statusCode ?? 0;
  if (status >= 300 && status < 400) throw new OutboundFailed(`HTTP ${status}: redirect not followed`);
  if (status < 200 || status >= 300) throw new OutboundFailed(`HTTP ${status}`);
  const encoding = (response.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== '') {
    const named = /^[a-z0-9.-]{1,20}$/.test(encoding) ? ` (Content-Encoding ${encoding})` : '';
    throw new OutboundFailed(`compressed answer refused${named}`);
  }
  const tooLarge = new OutboundFailed(`answer over ${maxBytes} bytes`);
  if (Number(response.headers['content-length'] ?? 0) > maxBytes) throw tooLarge;
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    total += chunk.length;
    if (total > maxBytes) throw tooLarge;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body)) as unknown;
  } catch {
    throw new OutboundFailed('not JSON');
  }
}

function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? code : undefined;
}

function networkFailure(error: unknown): OutboundFailed {
  const code = codeOf(error);
  if (code === 'ECONNREFUSED') return new OutboundFailed('connection refused');
  if (code === 'ECONNRESET') return new OutboundFailed('connection reset before the answer ended');
  if (code !== undefined && /CERT|SSL|TLS|SELF_SIGNED|HOSTNAME/.test(code)) return new OutboundFailed(`TLS failed (${code})`);
  return new OutboundFailed(`request failed (${code ?? 'error'})`);
}
