/**
 * Benchmark entry: `npm run bench -- <name> [options]`.
 *   http   read path of one node vs a bare uWebSockets.js app (bench/http/run.ts)
 *   raft   the Raft library: three processes over WebSockets with the LevelDB log (bench/raft/run.ts)
 */
const [name, ...rest] = process.argv.slice(2);
const entries: Record<string, string> = { http: './http/run.js', raft: './raft/run.js' };
const entry = name ? entries[name] : undefined;
if (!entry) {
  console.error(`usage: npm run bench -- <${Object.keys(entries).join('|')}> [options]`);
  process.exit(2);
}
process.argv = [process.argv[0]!, process.argv[1]!, ...rest];
await import(entry);
