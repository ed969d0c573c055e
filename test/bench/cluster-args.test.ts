/** The cluster benchmark's option parsing (bench/cluster/run.ts): defaults, flags, and bad values refused. */
import { describe, expect, it } from 'vitest';
import { parseClusterArgs } from '../../bench/cluster/run.js';

describe('cluster benchmark options', () => {
  it('defaults to etcd with mutual TLS peer links like Keel, and --etcd-peer-plain runs it with plain ones', () => {
    const defaults = parseClusterArgs([]);
    expect(defaults).toEqual({
      quick: false,
      trials: 20,
      concurrencies: [16, 64, 256],
      via: 'all',
      etcdPeers: 'tls',
      warmup_s: 3,
    });
    const plain = parseClusterArgs(['--quick', '--trials', '0', '--concurrency', '16', '--etcd-peer-plain']);
    expect(plain).toEqual({ quick: true, trials: 0, concurrencies: [16], via: 'all', etcdPeers: 'plain', warmup_s: 1 });
    expect(parseClusterArgs(['--warmup', '20']).warmup_s).toBe(20);
  });

  it('refuses unknown flags and bad values', () => {
    expect(() => parseClusterArgs(['--etcd-peer-tls'])).toThrow(/unknown argument/);
    expect(() => parseClusterArgs(['--via', 'nowhere'])).toThrow(/--via/);
    expect(() => parseClusterArgs(['--trials', '-1'])).toThrow(/--trials/);
    expect(() => parseClusterArgs(['--concurrency', '16,16'])).toThrow(/--concurrency/);
    for (const bad of ['0', '1.5', 'x', '601']) expect(() => parseClusterArgs(['--warmup', bad])).toThrow(/--warmup/);
  });
});
