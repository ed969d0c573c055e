import type { Services } from '../api/services.js';

/**
 * The API base URLs of every live controller: this node's first, then each other member that answers this node's
 * status polls (by id), each URL once. A single node: its own. What the `ctrls` claim of the network JWT and of the
 * enrollment JWTs lists (docs/cluster.md).
 */
export function liveApiBaseUrls(svc: Pick<Services, 'config' | 'cluster'>): string[] {
  const urls = new Set(svc.config.apiBaseUrls);
  const cluster = svc.cluster;
  if (cluster !== null) {
    const others = cluster.memberView().filter((m) => m.online && m.id !== cluster.id);
    for (const m of others.sort((a, b) => (a.id < b.id ? -1 : 1))) {
      for (const url of m.status?.apiAddresses ?? []) urls.add(url);
    }
  }
  return [...urls];
}
