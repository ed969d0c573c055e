import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { writeFileDurably } from './durable-file.js';

describe('writeFileDurably', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-durable-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes a string, bytes or chunks in order, with the mode asked, and leaves no temporary file', async () => {
    await writeFileDurably(join(dir, 'a'), 'text', { mode: 0o600 });
    await writeFileDurably(join(dir, 'b'), new Uint8Array([1, 2]));
    await writeFileDurably(join(dir, 'c'), [new Uint8Array([1]), new Uint8Array([2, 3])]);
    expect(readFileSync(join(dir, 'a'), 'utf8')).toBe('text');
    expect(statSync(join(dir, 'a')).mode & 0o777).toBe(0o600);
    expect([...readFileSync(join(dir, 'b'))]).toEqual([1, 2]);
    expect([...readFileSync(join(dir, 'c'))]).toEqual([1, 2, 3]);
    expect(readdirSync(dir).sort()).toEqual(['a', 'b', 'c']);
  });

  it('replaces a file, unless exclusive: then EEXIST, the old content kept, no temporary file left', async () => {
    writeFileSync(join(dir, 'f'), 'old');
    await expect(writeFileDurably(join(dir, 'f'), 'new', { exclusive: true })).rejects.toMatchObject({
      code: 'EEXIST',
    });
    expect(readFileSync(join(dir, 'f'), 'utf8')).toBe('old');
    await writeFileDurably(join(dir, 'f'), 'new');
    expect(readFileSync(join(dir, 'f'), 'utf8')).toBe('new');
    expect(readdirSync(dir)).toEqual(['f']);
  });

  it('a write that fails midway leaves the old file and no temporary file', async () => {
    writeFileSync(join(dir, 'g'), 'old');
    function* failing(): Generator<Uint8Array> {
      yield new Uint8Array([1]);
      throw new Error('source failed');
    }
    await expect(writeFileDurably(join(dir, 'g'), failing())).rejects.toThrow('source failed');
    expect(readFileSync(join(dir, 'g'), 'utf8')).toBe('old');
    expect(readdirSync(dir)).toEqual(['g']);
  });
});
