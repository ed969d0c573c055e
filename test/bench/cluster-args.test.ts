/** The cluster benchmark's option parsing (bench/cluster/run.ts): defaults, flags, and bad values refused. */
import { describe, expect, it } from 'vitest';
import { levelPrefix, median, parseClusterArgs, roundOrder, roundRatios } from '../../bench/cluster/run.js';
import type { WrkResult } from '../../bench/cluster/wrk.js';

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
      rounds: 1,
    });
    const plain = parseClusterArgs(['--quick', '--trials', '0', '--concurrency', '16', '--etcd-peer-plain']);
    expect(plain).toEqual({
      quick: true,
      trials: 0,
      concurrencies: [16],
      via: 'all',
      etcdPeers: 'plain',
      warmup_s: 1,
      rounds: 1,
    });
    expect(parseClusterArgs(['--warmup', '20']).warmup_s).toBe(20);
  });

  it('refuses unknown flags and bad values', () => {
    expect(() => parseClusterArgs(['--etcd-peer-tls'])).toThrow(/unknown argument/);
    expect(() => parseClusterArgs(['--via', 'nowhere'])).toThrow(/--via/);
    expect(() => parseClusterArgs(['--trials', '-1'])).toThrow(/--trials/);
    expect(() => parseClusterArgs(['--concurrency', '16,16'])).toThrow(/--concurrency/);
    for (const bad of ['0', '1.5', 'x', '601']) expect(() => parseClusterArgs(['--warmup', bad])).toThrow(/--warmup/);
    for (const bad of ['0', '2.5', 'x', '10']) expect(() => parseClusterArgs(['--rounds', bad])).toThrow(/--rounds/);
    expect(parseClusterArgs(['--rounds', '9']).rounds).toBe(9);
    for (const bad of ['-1', '1.5', 'x']) {
      expect(() => parseClusterArgs(['--raft-wal-mib', bad])).toThrow(/--raft-wal-mib/);
    }
    expect(parseClusterArgs(['--raft-wal-mib', '0']).raftWal_mib).toBe(0);
  });

  it('names every level of every round and system with a prefix of one length, distinct per level', () => {
    const prefixes = new Set<string>();
    for (const name of ['keel', 'etcd'])
      for (let round = 0; round <= 9; round++)
        for (const c of [0, 1, 16, 64, 256, 4096]) prefixes.add(levelPrefix(name, round, c));
    expect(prefixes.size).toBe(2 * 10 * 6);
    expect(new Set([...prefixes].map((p) => p.length))).toEqual(new Set([5]));
  });

  it('alternates which system goes first, and pairs the ratios round by round', () => {
    expect(roundOrder('k', 'e', 1)).toEqual(['k', 'e']);
    expect(roundOrder('k', 'e', 2)).toEqual(['e', 'k']);
    expect(roundOrder('k', 'e', 3)).toEqual(['k', 'e']);
    expect(roundOrder('k', null, 2)).toEqual(['k']);
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBeNaN();
    const r = (writesPerSec: number, p99_ms: number) => ({ writesPerSec, p99_ms }) as WrkResult;
    const ratios = roundRatios({ c: 16, keel: [r(200, 10), r(300, 30)], etcd: [r(100, 20), r(100, 10)] });
    expect(ratios).toEqual({ writes: [2, 3], p99: [0.5, 3] });
    expect(roundRatios({ c: 16, keel: [r(200, 10)], etcd: [] })).toEqual({ writes: [], p99: [] });
  });
});
