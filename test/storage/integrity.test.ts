/** The data integrity check over a store (storage/integrity.ts): bounds of its report. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkIntegrity } from '../../storage/integrity.js';
import { Schema } from '../../storage/schema.js';
import { Store } from '../../storage/store.js';
import type { EntityDef } from '../../storage/types.js';

const defs: EntityDef[] = [
  { name: 'owners', type: 'owner', fields: { name: { type: 'string', unique: true } } },
  {
    name: 'pets',
    type: 'pet',
    fields: { ownerId: { type: 'string', ref: { entity: 'owners', onDelete: 'cascade' } } },
  },
];
const AT = '2026-01-01T00:00:00.000Z';
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function store(): Promise<Store> {
  const d = mkdtempSync(join(tmpdir(), 'keel-integrity-'));
  dirs.push(d);
  return Store.open(d, new Schema(defs));
}

describe('checkIntegrity', () => {
  it('lists at most maxFindings problems and says when there were more', async () => {
    const s = await store();
    const pets = s.collection('pets');
    for (let i = 0; i < 5; i++) pets.put({ id: `p${i}`, createdAt: AT, updatedAt: AT, tags: {}, ownerId: 'gone' });
    const all = await checkIntegrity(s, { fix: false, maxFindings: 10 });
    expect(all.findings.map((f) => f.description)).toEqual(
      [0, 1, 2, 3, 4].map((i) => `pets p${i}: ownerId names owners gone, which does not exist`),
    );
    expect(all.tooManyErrors).toBe(false);
    const cut = await checkIntegrity(s, { fix: false, maxFindings: 3 });
    expect(cut.findings).toHaveLength(3);
    expect(cut.tooManyErrors).toBe(true);
    await s.close();
  });

  it('rebuilds a damaged index with fix, and leaves a sound store alone', async () => {
    const s = await store();
    const owners = s.collection('owners');
    owners.put({ id: 'o1', createdAt: AT, updatedAt: AT, tags: {}, name: 'ann' });
    expect((await checkIntegrity(s, { fix: true, maxFindings: 10 })).findings).toEqual([]);
    const epoch = s.epoch;
    const stamp = s.stampOf(['owners']);
    (owners as any).uniques.find((u: any) => u.field === 'name').map.delete('ann');
    expect([...(owners.lookup('name', 'ann') ?? [])]).toEqual([]);
    const report = await checkIntegrity(s, { fix: true, maxFindings: 10 });
    expect(report.findings).toEqual([{ description: 'owners: unique index name lacks ann → o1', fixed: true }]);
    expect([...(owners.lookup('name', 'ann') ?? [])]).toEqual(['o1']);
    expect(s.epoch).toBeGreaterThan(epoch);
    // every cached rendering is stale, whatever collections it read
    expect(s.stampOf(['owners'])).toBeGreaterThan(stamp);
    expect(s.stampOf([])).toBeGreaterThan(0);
    await s.close();
  });
});
