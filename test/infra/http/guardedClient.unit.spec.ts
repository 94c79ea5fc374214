import { describe, expect, it } from 'vitest';
import { allowListFrom, classifyAddress, createGuardedClient } from '../../../infra/http/guardedClient.ts';

describe('classifyAddress', () => {
  const refused: [string, string, string?][] = [
    // IPv4
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['10.0.0.1', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['198.51.100.7', 'reserved'],
    ['203.0.113.9', 'reserved'],
    // IPv6
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['::', 'unspecified'],
    ['fc00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['fec0::1', 'private'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'reserved'],
    ['2001::1', 'reserved'],
    ['3fff::1', 'reserved'],
    ['100::1', 'reserved'],
    ['64:ff9b:1::a00:1', 'reserved'],
    // IPv4 inside IPv6
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['0:0:0:0:0:ffff:7f00:0001', 'loopback'],
    ['::FFFF:169.254.169.254', 'link-local'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:0.0.0.0', 'unspecified'],
    ['::127.0.0.1', 'loopback', '127.0.0.1'],
    ['::7f00:1', 'loopback', '127.0.0.1'],
    ['::ffff:0:7f00:1', 'loopback', '127.0.0.1'],
    ['64:ff9b::127.0.0.1', 'loopback', '127.0.0.1'],
    ['64:ff9b::a9fe:a9fe', 'link-local', '169.254.169.254'],
    ['64:ff9b::c0a8:101', 'private', '192.168.1.1'],
    ['2002:7f00:1::', 'loopback', '127.0.0.1'],
    ['2002:a9fe:a9fe::1', 'link-local', '169.254.169.254'],
    ['2002:a00:1:1::1', 'private', '10.0.0.1'],
    ['::8.8.8.8', 'reserved'], // IPv4-compatible, never routed, whatever it carries
  ];
  it.each(refused)('%s is %s', (address, kind, via) => {
    expect(classifyAddress(address)).toEqual(via === undefined ? { kind } : { kind, via });
  });

  const accepted = [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.215.14',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '169.253.255.255',
    '192.167.255.255',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2a00:1450:4007:80e::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808', // DNS64's answer for a public IPv4-only host
    '2002:808:808::1', // 6to4 of a public host
  ];
  it.each(accepted)('%s is public', (address) => {
    expect(classifyAddress(address)).toBeUndefined();
  });

  it('throws a RangeError on what is not an IP address', () => {
    for (const text of ['localhost', '127.1', '0x7f000001', '2130706433', '1.2.3.4.5', ':::1', '']) {
      expect(() => classifyAddress(text)).toThrow(RangeError);
    }
  });
});

describe('allow list', () => {
  it('splits OUTBOUND_ALLOW on commas, blanks ignored', () => {
    expect(allowListFrom(' 10.1.0.0/16, ::1/128 ,,localhost ')).toEqual(['10.1.0.0/16', '::1/128', 'localhost']);
    expect(allowListFrom(undefined)).toEqual([]);
    expect(allowListFrom('')).toEqual([]);
  });

  it('accepts CIDRs, IPs and host names, and refuses what is none of these when the client is made', () => {
    expect(() =>
      createGuardedClient({
        allow: ['10.1.0.0/16', '::1/128', '[fd00::]/8', '127.0.0.1', '::1', '::ffff:10.0.0.0/104', 'localhost', 'Metrics.Internal'],
      }),
    ).not.toThrow();
    for (const entry of [
      '10.0.0.0/33',
      '::1/129',
      '10.0.0.0/',
      '10.0.0.0/8/8',
      'host/8',
      'a b',
      'http://x',
      'x:80',
      'user@x',
      '::ffff:10.0.0.0/64',
      '10.0.0.0/-1',
      '10.0.0.0/0x8',
    ]) {
      expect(() => createGuardedClient({ allow: [entry] }), entry).toThrow(/OUTBOUND_ALLOW: ".*" is not a CIDR/);
    }
  });
});
