#!/usr/bin/env node
// Entry point of the `keel` command: runs the compiled CLI (npm start / npm run build compile it to dist/).
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write('keel: not built yet: run `npm run build` (or `npm start`) first\n');
  process.exit(1);
}
const { main } = await import(entry);
const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);
