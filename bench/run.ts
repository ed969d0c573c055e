/**
 * Benchmark entry: `npm run bench -- <name> [options]`.
 *   http   read path of one node vs a bare uWebSockets.js app (bench/http/run.ts)
 *   raft   the Raft library: three processes over WebSockets with the LevelDB log, vs etcd (bench/raft/run.ts)
 *   cluster REST writes through a 3-node Keel cluster vs a 3-member etcd cluster, and failover (bench/cluster/run.ts)
 *   policy the derived role index: incremental maintenance vs naive evaluation (bench/policy.ts)
 *   auth   password logins per second beside the raw argon2id verify rate (bench/auth.ts)
 *   access the policy engine on a real store: load, an identity's services, a policy change, session create (bench/access.ts)
 *   apply  the CPU a replicated identity create costs a member's apply path (bench/apply.ts)
 *   startup a single node's start on 100 000 identities and 10 000 services vs a raw LevelDB scan (bench/startup.ts)
 *   metrics a Prometheus scrape of /metrics, empty and on 100 000 identities, vs prom-client's bare defaults (bench/metrics.ts)
 */
/** The benchmarks that read their options from process.argv when imported. */
const SCRIPTS: Record<string, string> = {
  http: './http/run.js',
  policy: './policy.js',
  auth: './auth.js',
  access: './access.js',
  apply: './apply.js',
  startup: './startup.js',
  metrics: './metrics.js',
};
/** The benchmarks that export `main(args)`. */
const MAINS: Record<string, string> = { raft: './raft/run.js', cluster: './cluster/run.js' };

const [name = '', ...rest] = process.argv.slice(2);
if (Object.hasOwn(SCRIPTS, name)) {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import(SCRIPTS[name]!);
} else if (Object.hasOwn(MAINS, name)) {
  const { main } = (await import(MAINS[name]!)) as { main: (args: string[]) => Promise<void> };
  await main(rest);
} else {
  const names = [...Object.keys(SCRIPTS).slice(0, 1), ...Object.keys(MAINS), ...Object.keys(SCRIPTS).slice(1)];
  console.error(`usage: npm run bench -- <${names.join('|')}> [options]`);
  process.exit(2);
}
