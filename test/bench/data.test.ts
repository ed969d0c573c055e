/** The generated data of the access and startup benchmarks (bench/data.ts): valid rows, the sizes asked, seeded. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AT, applyAll, benchCommands, type DataSizes, hotCount } from '../../bench/data.js';
import { DEFAULT_AUTH_POLICY } from '../../src/model/auth-policy.js';
import { buildSchema } from '../../src/model/index.js';
import { Store } from '../../storage/store.js';

const dir = mkdtempSync(join(tmpdir(), 'keel-bench-data-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('benchmark data', () => {
  it('every generated create applies on a store; the sizes asked, hot identities, the same rows on every run', async () => {
    const sizes: DataSizes = { identities: 400, services: 40, routers: 10, policies: 30 };
    const store = await Store.open(join(dir, 'state'), buildSchema());
    try {
      // what a controller's first start creates, and the generated commands refer to
      await store.applyGroup(
        [
          { op: 'create', entity: 'identity-types', id: 'Default', data: { name: 'Default' }, at: AT },
          { op: 'create', entity: 'auth-policies', id: 'default', data: structuredClone(DEFAULT_AUTH_POLICY), at: AT },
        ],
        { sync: false },
      );
      await applyAll(store, benchCommands(sizes));
      expect(store.collection('identities').size).toBe(400);
      expect(store.collection('services').size).toBe(40);
      expect(store.collection('edge-routers').size).toBe(10);
      const policies = ['service-policies', 'edge-router-policies', 'service-edge-router-policies'] as const;
      expect(policies.reduce((n, e) => n + store.collection(e).size, 0)).toBe(31); // and hot-policy
      const hot = [...store.collection('identities').scan()].filter((r) =>
        (r.roleAttributes as string[]).includes('hot'),
      );
      expect(hot).toHaveLength(hotCount(sizes));
      expect(hotCount(sizes)).toBe(100);
      // seeded: a second generation is the same commands
      expect(JSON.stringify([...benchCommands(sizes)])).toBe(JSON.stringify([...benchCommands(sizes)]));
      // a refused command fails the load rather than leaving a smaller data set
      await expect(applyAll(store, benchCommands(sizes))).rejects.toThrow('bench data rejected');
    } finally {
      await store.close();
    }
  });
});
