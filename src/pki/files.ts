/** Durable, atomic file writes for PKI material: a file is either absent or complete, keys are 0600. */
import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PkiError } from './errors.js';

export interface PkiFile {
  name: string;
  content: string;
  /** Private key: mode 0600 (else 0644). */
  secret: boolean;
}

export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export async function refuseExisting(dir: string, names: string[]): Promise<void> {
  for (const n of names) {
    if (await exists(join(dir, n))) throw new PkiError('ALREADY_EXISTS', `${join(dir, n)} exists; not overwriting it`);
  }
}

async function syncDir(dir: string): Promise<void> {
  const h = await open(dir, 'r');
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

/**
 * Writes each file to a synced temporary file first, then moves it into place: with `exclusive`, a file that
 * already exists is never replaced (ALREADY_EXISTS); without, it is (used for orphans of an interrupted write).
 * Files are written in order, so the last one can mark the set complete.
 */
export async function writeFiles(dir: string, files: PkiFile[], opts: { exclusive: boolean }): Promise<void> {
  for (const f of files) {
    const path = join(dir, f.name);
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    const tmp = `${path}.tmp-${randomBytes(6).toString('hex')}`;
    const h = await open(tmp, 'wx', f.secret ? 0o600 : 0o644);
    try {
      await h.writeFile(f.content);
      await h.sync();
    } finally {
      await h.close();
    }
    try {
      if (opts.exclusive) {
        await link(tmp, path); // fails with EEXIST instead of replacing
        await unlink(tmp);
      } else {
        await rename(tmp, path);
      }
    } catch (err) {
      await unlink(tmp).catch(() => {});
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new PkiError('ALREADY_EXISTS', `${path} exists; not overwriting it`);
      }
      throw err;
    }
    await syncDir(dirname(path));
  }
}

export async function readPki(dir: string, name: string): Promise<string> {
  try {
    return await readFile(join(dir, name), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PkiError('MISSING_FILE', `${join(dir, name)} is missing`);
    }
    throw err;
  }
}
