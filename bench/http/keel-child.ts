/**
 * Benchmark child: runs one Keel controller (uWebSockets.js engine, synced writes; `--tls`: node engine with API
 * TLS) in its own process and prints `DATADIR <dir>` and `READY <port>` once listening. Optional: `--identities N` preloads N identities straight into the store (in
 * batches, through the same command path) before the listener opens, and reports how long that and a cold start
 * took.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Controller } from '../../src/controller.js';
import type { Command } from '../../src/model/rows.js';
import { shortId } from '../../src/util/ids.js';
import { MAX_GROUP_COMMANDS } from '../../storage/store.js';

const { values } = parseArgs({
  options: {
    identities: { type: 'string', default: '0' },
    engine: { type: 'string', default: 'uws' },
    tls: { type: 'boolean', default: false },
  },
});
const n = Number(values.identities);
const dataDir = mkdtempSync(join(tmpdir(), 'keel-bench-'));
const opts = {
  dataDir,
  host: '127.0.0.1',
  port: 0,
  adminPassword: 'bench-password',
  // --tls: API TLS with client certificates (cert logins), which needs the node engine
  engine: (values.tls ? 'node' : values.engine) as 'uws' | 'node',
  apiTls: values.tls === true,
};
let ctl = await Controller.start(opts);
if (n > 0) {
  const t0 = performance.now();
  const at = new Date().toISOString();
  for (let i = 0; i < n; i += MAX_GROUP_COMMANDS) {
    const cmds: Command[] = [];
    for (let j = i; j < Math.min(n, i + MAX_GROUP_COMMANDS); j++) {
      cmds.push({
        op: 'create',
        entity: 'identities',
        id: shortId(),
        at,
        data: {
          name: `bench-${j}`,
          typeId: 'Default',
          isAdmin: false,
          isDefaultAdmin: false,
          authPolicyId: 'default',
          roleAttributes: [`group-${j % 100}`, j % 2 ? 'odd' : 'even'],
          tags: { n: String(j) },
        },
      });
    }
    await ctl.svc.store.applyGroup(cmds, { sync: false, index: ctl.svc.store.appliedIndex + cmds.length });
  }
  const load_ms = performance.now() - t0;
  await ctl.stop();
  const t1 = performance.now();
  ctl = await Controller.start(opts);
  const start_ms = performance.now() - t1;
  process.stdout.write(`LOADED ${n} ${load_ms.toFixed(0)} ${start_ms.toFixed(0)}\n`);
}
process.stdout.write(`DATADIR ${dataDir}\n`);
process.stdout.write(`READY ${ctl.port}\n`);
process.on('SIGTERM', async () => {
  await ctl.stop();
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(0);
});
