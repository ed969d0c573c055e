#!/usr/bin/env node
// Compiles the TypeScript sources to dist/ unless dist is newer than every source file.
import { execSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const roots = ['src', 'raft', 'http', 'storage', 'bench', 'tsconfig.build.json', 'package-lock.json'];
function newest(path) {
  if (!existsSync(path)) return 0;
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let max = st.mtimeMs;
  for (const name of readdirSync(path)) max = Math.max(max, newest(join(path, name)));
  return max;
}
const stamp = 'dist/.build-stamp';
const force = process.argv.includes('--force');
if (force || !existsSync(stamp) || Math.max(...roots.map(newest)) > statSync(stamp).mtimeMs) {
  execSync('npx tsc -p tsconfig.build.json', { stdio: 'inherit' });
  execSync(`node -e "require('fs').writeFileSync('${stamp}', String(Date.now()))"`);
}
