/**
 * `keel run` with its data directory on a small tmpfs, filled with identities carrying 100 KB tags until LevelDB
 * fails a write (ENOSPC): the failed write and every later one is refused (503 STORE_FAILED, never 201), the
 * process exits non-zero within about a second with a fatal log line, and a restart on a copy of the data (on a
 * disk with room) holds every write that was acknowledged with 201. Needs `mount -t tmpfs` (root): where
 * mounting is impossible the test says why and is skipped.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT_STORE_FAILED } from '../../src/cli/main.js';
import { buildKeel, runKeel } from '../support/keel-process.js';
import { call, login } from '../support/server.js';

const PASSWORD = 'disk-full-pass';
const TMPFS_SIZE = '4m';
const TAG_BYTES = 100_000;
/** More than a 4 MiB disk can take at 100 KB each: the loop ends by the disk failing, not by this bound. */
const MAX_CREATES = 400;
const WRITERS = 3;
/** Writes each writer still tries after its first refusal (none of them may get 201). */
const TRIES_AFTER_REFUSAL = 5;
/** keel exits within about a second of the failure; this allows for a loaded machine. */
const EXIT_WITHIN_MS = 5_000;

let root = '';
let mountPoint = '';
let mounted = false;
let cannotMount = '';

beforeAll(() => {
  buildKeel();
  root = mkdtempSync(join(tmpdir(), 'keel-diskfull-'));
  mountPoint = join(root, 'small');
  mkdirSync(mountPoint);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_SIZE}`, 'tmpfs', mountPoint], { stdio: 'pipe' });
    mounted = true;
  } catch (err) {
    cannotMount = String((err as { stderr?: Buffer }).stderr ?? err).trim();
  }
}, 120_000);

afterAll(() => {
  if (mounted) execFileSync('umount', ['-l', mountPoint]);
  rmSync(root, { recursive: true, force: true });
});

describe('keel run on a disk that fills up', () => {
  it('refuses writes once one fails, exits non-zero, and loses no acknowledged write', async (ctx) => {
    if (!mounted) {
      console.warn(`disk-full test skipped: cannot mount a tmpfs here (${cannotMount})`);
      ctx.skip();
    }
    const data = join(mountPoint, 'data');
    const keel = await runKeel(data, ['--admin-password', PASSWORD]);
    let failedAt = 0;
    const acked: string[] = [];
    const refused: number[] = [];
    try {
      const token = await login(keel.base, 'admin', PASSWORD);
      let attempts = 0;
      const writer = async () => {
        let refusals = 0;
        while (attempts < MAX_CREATES && refusals <= TRIES_AFTER_REFUSAL) {
          const n = attempts++;
          let status: number;
          let body: { data?: { id: string }; error?: { code: string } };
          try {
            const r = await call('POST', `${keel.base}/edge/management/v1/identities`, {
              token,
              body: {
                name: `big-${n}`,
                type: 'User',
                isAdmin: false,
                tags: { blob: randomBytes(TAG_BYTES * 0.75).toString('base64') },
              },
            });
            status = r.status;
            body = r.body;
          } catch {
            return; // the process is gone
          }
          if (status === 201) {
            acked.push(body.data!.id);
            continue;
          }
          if (failedAt === 0) failedAt = Date.now();
          refused.push(status);
          refusals++;
          expect(status, JSON.stringify(body)).toBe(503);
          expect(body.error?.code).toBe('STORE_FAILED');
        }
      };
      await Promise.all(Array.from({ length: WRITERS }, writer));
      expect(attempts).toBeLessThan(MAX_CREATES); // the disk filled up
      expect(refused.length).toBeGreaterThan(0);
      expect(acked.length).toBeGreaterThan(5);

      const sinceFailure_ms = Date.now() - failedAt;
      const exit = await Promise.race([
        keel.exited,
        new Promise((r) => setTimeout(() => r('still running'), Math.max(0, EXIT_WITHIN_MS - sinceFailure_ms))),
      ]);
      expect(exit).toEqual({ code: EXIT_STORE_FAILED, signal: null });
      expect(keel.stderr()).toMatch(/"level":60.*exiting: the data store failed a write/);
    } finally {
      keel.child.kill('SIGKILL');
      await keel.exited;
    }

    // free nothing on the full disk: restart on a copy with room, as an operator moving the data would
    const copy = join(root, 'copy');
    cpSync(data, copy, { recursive: true });
    const again = await runKeel(copy);
    try {
      const token = await login(again.base, 'admin', PASSWORD);
      const missing: string[] = [];
      for (const id of acked) {
        const r = await call('GET', `${again.base}/edge/management/v1/identities/${id}`, { token });
        if (r.status !== 200) missing.push(id);
      }
      expect(missing).toEqual([]);
      const more = await call('POST', `${again.base}/edge/management/v1/identities`, {
        token,
        body: { name: 'after-restart', type: 'User', isAdmin: false },
      });
      expect(more.status).toBe(201);
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }
  }, 120_000);
});
