/** Durable, atomic file writes: a file is either its old content (or absent) or its whole new content. */
import { randomBytes } from 'node:crypto';
import { link, open, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';

/** Syncs directory `dir`: a file renamed or linked into it is durable once this resolves. */
export async function syncDir(dir: string): Promise<void> {
  const h = await open(dir, 'r');
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

/**
 * Writes `data` (a string, bytes, or chunks in order) to `path`: first to a synced temporary file beside it
 * (`<path>.tmp-<random>`, mode `mode`), then moved into place, then the directory synced. With `exclusive` an
 * existing file is never replaced: the write fails with the link's EEXIST instead. A crash leaves the old file or
 * the new one, never part of one (at worst a temporary orphan, which nothing reads).
 */
export async function writeFileDurably(
  path: string,
  data: string | Uint8Array | Iterable<Uint8Array>,
  opts: { mode?: number; exclusive?: boolean } = {},
): Promise<void> {
  const tmp = `${path}.tmp-${randomBytes(6).toString('hex')}`;
  const h = await open(tmp, 'wx', opts.mode ?? 0o644);
  try {
    if (typeof data === 'string' || data instanceof Uint8Array) await h.writeFile(data);
    else for (const chunk of data) await h.write(chunk);
    await h.sync();
  } catch (err) {
    await h.close();
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await h.close();
  try {
    if (opts.exclusive === true) {
      await link(tmp, path); // fails with EEXIST instead of replacing
      await unlink(tmp);
    } else {
      await rename(tmp, path);
    }
  } catch (err) {
    await unlink(tmp).catch(() => {});
    throw err;
  }
  await syncDir(dirname(path));
}
