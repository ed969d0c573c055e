/** Benchmark baseline child: a bare uWebSockets.js app answering every request with one fixed JSON body. */
import { serveStaticJson } from '../../http/bare-uws.js';

const size = Number(process.argv[2] ?? '100');
// A JSON document of exactly `size` bytes.
const filler = Math.max(0, size - '{"data":""}'.length);
const body = `{"data":"${'x'.repeat(filler)}"}`;
const srv = await serveStaticJson(body, 0);
process.stdout.write(`READY ${srv.port}\n`);
process.on('SIGTERM', async () => {
  await srv.close();
  process.exit(0);
});
