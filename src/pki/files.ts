/** Durable, atomic file writes for PKI material: a file is either absent or complete, keys are 0600. */
import { mkdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { writeFileDurably } from '../util/durable-file.js';
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

/**
 * Writes each file durably (writeFileDurably): with `exclusive`, a file that already exists is never replaced
 * (ALREADY_EXISTS); without, it is (used for orphans of an interrupted write). Files are written in order, so the
 * last one can mark the set complete.
 */
export async function writeFiles(dir: string, files: PkiFile[], opts: { exclusive: boolean }): Promise<void> {
  for (const f of files) {
    const path = join(dir, f.name);
    await mkdir(dirname(path), { recursive: true, mode: 0o700 });
    try {
      await writeFileDurably(path, f.content, { mode: f.secret ? 0o600 : 0o644, exclusive: opts.exclusive });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') {
        throw new PkiError('ALREADY_EXISTS', `${path} exists; not overwriting it`);
      }
      throw err;
    }
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
