/**
 * `keel cluster list|add|remove|transfer-leadership` (src/cli/cluster.ts) against a running cluster: three
 * in-process members, the commands presenting n1's peer certificate, as an operator runs them on a member's host.
 * And the other way to inspect it: every member's Prometheus metrics (src/metrics.ts), Raft's among them.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterCommand } from '../../src/cli/cluster.js';
import { KEEL_VERSION } from '../../src/version.js';
import { inProcessCluster } from './in-process.js';
import { until } from './support.js';

const setup = inProcessCluster('keel-cluster-cli-', ['n1', 'n2', 'n3'], {
  metrics: { host: '127.0.0.1', port: 0 },
});
const nodes = setup.nodes;
const cluster = setup.member;

beforeAll(() => setup.start(), 60_000);
afterAll(() => setup.stop());

/** Runs `keel cluster <args> --peer <a member> --pki-dir <n1's>`; its exit code and the lines it printed. */
async function keelCluster(args: string[], member = 0): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const peer = ['--peer', cluster(member).peerAddress, '--pki-dir', join(setup.dir, 'n1', 'pki')];
  const code = await clusterCommand([...args, ...peer], (l) => lines.push(l));
  return { code, lines };
}

const rows = (lines: string[]) => lines.slice(1).map((l) => l.split('\t'));

/** One sample's value from Prometheus text (`name{labels} value`); undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("every member's metrics", () => {
  it('say who leads, the term, the voters online and the indexes, alike on every member', async () => {
    const scrapeAll = () =>
      Promise.all(nodes.map(async (n) => (await fetch(`http://127.0.0.1:${n.ctl.metricsPort}/metrics`)).text()));
    // a moment when the three agree on one term and one leader, the one n1 names (an election may be under way), and
    // each has seen the others answer its status poll (once a second)
    const texts = await until(
      async () => {
        const t = await scrapeAll();
        const leaders = t.map((x) => sample(x, 'keel_raft_is_leader'));
        const terms = new Set(t.map((x) => sample(x, 'keel_raft_term')));
        const named = cluster(0).raft.leaderId();
        const online = t.every((x) => sample(x, 'keel_cluster_members_online') === 3);
        const one = leaders.filter((l) => l === 1).length === 1 && terms.size === 1 && online;
        return one && named !== null && leaders[Number(named.slice(1)) - 1] === 1 ? t : null;
      },
      10_000,
      'one leader and one term',
    );
    for (const [i, text] of texts.entries()) {
      expect(sample(text, `keel_info{version="${KEEL_VERSION}",node_id="n${i + 1}"}`)).toBe(1);
      expect(sample(text, 'keel_raft_has_leader')).toBe(1);
      expect(sample(text, 'keel_raft_term')).toBeGreaterThan(0);
      expect(sample(text, 'keel_cluster_members{role="voter"}')).toBe(3);
      expect(sample(text, 'keel_cluster_members{role="learner"}')).toBe(0);
      expect(sample(text, 'keel_cluster_members_online')).toBe(3);
      const commit = sample(text, 'keel_raft_commit_index')!;
      expect(commit).toBeGreaterThan(0);
      expect(sample(text, 'keel_raft_applied_index')).toBeLessThanOrEqual(commit);
      expect(sample(text, 'keel_store_rows{entity="identities"}')).toBeGreaterThan(0);
    }
  });
});

describe('keel cluster (the membership commands)', () => {
  it('list: every member with its address, role, reachability, applied index and API addresses', async () => {
    const { code, lines } = await keelCluster(['list'], 1);
    expect(code).toBe(0);
    expect(lines[0]).toBe('id\taddress\tvoter\tleader\treachable\tapplied\tapiAddresses\trouterAddress');
    const leader = cluster(0).raft.leaderId();
    expect(rows(lines).map((r) => r.slice(0, 5))).toEqual(
      [0, 1, 2].map((i) => [`n${i + 1}`, cluster(i).peerAddress, 'true', String(leader === `n${i + 1}`), 'true']),
    );
    for (const [i, r] of rows(lines).entries()) {
      expect(Number(r[5])).toBeGreaterThan(0);
      expect(r[6]!.split(',')).toContain(nodes[i]!.base);
      expect(r[7]).toBe('-'); // these members have no router control listener
    }
  }, 30_000);

  it('transfer-leadership, add (a learner), remove: the membership follows, and list shows it', async () => {
    const from = cluster(0).raft.leaderId()!;
    const to = ['n1', 'n2', 'n3'].find((id) => id !== from)!;
    expect(await keelCluster(['transfer-leadership', '--to', to])).toEqual({ code: 0, lines: [`${to} is the leader`] });
    await until(() => nodes.every((_, i) => cluster(i).raft.leaderId() === to), 10_000, `${to} leads everywhere`);

    expect(await keelCluster(['add', '--id', 'n9', '--address', '127.0.0.1:1', '--learner'])).toEqual({
      code: 0,
      lines: ['added n9'],
    });
    await until(() => cluster(2).raft.status().conf.learners.includes('n9'), 10_000, 'n9 a learner on n3');
    // nothing listens there: listed as it is, unreachable
    const listed = rows((await keelCluster(['list'])).lines).find((r) => r[0] === 'n9');
    expect(listed).toEqual(['n9', '127.0.0.1:1', 'false', 'false', 'false', '-', '-', '-']);

    const removed = await keelCluster(['remove', '--id', 'n9'], 2);
    expect(removed.code).toBe(0);
    expect(removed.lines[0]).toMatch(/^removed n9 \(it stops once it learns of it/);
    await until(() => nodes.every((_, i) => !cluster(i).raft.status().conf.learners.includes('n9')), 10_000, 'n9 gone');
    expect(rows((await keelCluster(['list'])).lines).map((r) => r[0])).toEqual(['n1', 'n2', 'n3']);
  }, 60_000);

  it('refuses incomplete commands with what is missing; an unknown one prints the usage (status 2)', async () => {
    await expect(keelCluster(['remove'])).rejects.toThrow('remove needs --id');
    await expect(keelCluster(['add', '--id', 'n8'])).rejects.toThrow('add needs --id and --address');
    await expect(keelCluster(['transfer-leadership'])).rejects.toThrow('transfer-leadership needs --to');
    await expect(clusterCommand(['list', '--peer', cluster(0).peerAddress], () => {})).rejects.toThrow(
      /--pki-dir DIR .* is required/,
    );
    const usage: string[] = [];
    expect(await clusterCommand(['frob'], (l) => usage.push(l))).toBe(2);
    expect(usage.join('\n')).toContain('keel cluster remove --peer ADDR --pki-dir DIR --id ID');
  }, 30_000);
});
