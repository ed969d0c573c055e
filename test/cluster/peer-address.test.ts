import { describe, expect, it } from 'vitest';
import { isPeerAddress } from '../../src/cluster/peer-address.js';

describe('a peer address', () => {
  it('is HOST:PORT: a DNS name, an IPv4 or a bracketed IPv6 address, a port 1-65535', () => {
    for (const a of ['ctl1:6262', 'ctl1.example.com:1', '10.0.0.1:65535', '[::1]:6262', '[fe80::1]:443', 'a:1']) {
      expect(isPeerAddress(a), a).toBe(true);
    }
  });
  it('is nothing else: no scheme, path, query, user info, space, or port out of range', () => {
    for (const a of [
      '',
      'ctl1',
      'ctl1:',
      ':6262',
      'ctl1:0',
      'ctl1:65536',
      'ctl1:123456',
      'tls:ctl1:6262',
      'https://ctl1:6262',
      'ctl1:6262/peer-api',
      'ctl1:6262?x',
      'u@ctl1:6262',
      'ctl 1:6262',
      '::1:6262',
      '-ctl1:6262',
      `${'a'.repeat(300)}:1`,
    ]) {
      expect(isPeerAddress(a), a).toBe(false);
    }
  });
});
