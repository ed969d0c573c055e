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
const [name, ...rest] = process.argv.slice(2);
if (name === 'http') {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import('./http/run.js');
} else if (name === 'raft') {
  const { main } = await import('./raft/run.js');
  await main(rest);
} else if (name === 'cluster') {
  const { main } = await import('./cluster/run.js');
  await main(rest);
} else if (name === 'policy') {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import('./policy.js');
} else if (name === 'auth') {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import('./auth.js');
} else if (name === 'access') {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import('./access.js');
} else if (name === 'apply') {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import('./apply.js');
} else if (name === 'startup') {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import('./startup.js');
} else if (name === 'metrics') {
  process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
  await import('./metrics.js');
} else {
  console.error('usage: npm run bench -- <http|raft|cluster|policy|auth|access|apply|startup|metrics> [options]');
  process.exit(2);
}
