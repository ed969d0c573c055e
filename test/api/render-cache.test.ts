/**
 * The rendering cache (Entity.renderJson) keys a row's JSON by the store stamp of the collections its `toApi`
 * `reads`. These tests drive random writes into every collection and check (1) that the declarations are
 * complete: a write that changes none of an entity's declared collections never changes the fresh rendering of
 * a row it left in place, and (2) that a cached rendering always equals a fresh one.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Entity } from '../../src/api/entity.js';
import { Services } from '../../src/api/services.js';
import { SessionService } from '../../src/auth/sessions.js';
import { buildSchema, ENTITIES } from '../../src/model/index.js';
import type { Store as KeelStore } from '../../src/model/rows.js';
import { routerPresenceOf } from '../../src/routers/presence.js';
import { LocalProposer } from '../../storage/local-proposer.js';
import { Store } from '../../storage/store.js';
import type { Command, EntityDef, FieldDef, Row } from '../../storage/types.js';
import { manualClock } from '../support/clock.js';
import { rng } from '../support/rng.js';
import { tempDirs } from '../support/temp-dir.js';

const AT = '2026-01-01T00:00:00.000Z';
const WORDS = ['ann', 'bob', 'cat', 'dan', 'eve'];
const STEPS = 600;
const ROWS_PER_COLLECTION = 2;
/**
 * Row ids come from one small pool in every collection: a rendering that looks up the row of the same id in
 * another collection (an edge router's router row) meets one.
 */
const ID_POOL = 3;

/** Stored values whose shape a `toApi` relies on (the API validates them; these tests write past the API). */
const SHAPED: Record<string, Record<string, (pick: () => number) => unknown>> = {
  'auth-policies': {
    primary: () => ({ cert: { allowed: true }, updb: { allowed: true }, extJwt: { allowed: false } }),
    secondary: () => ({ requireTotp: false, requireExtJwtSigner: null }),
  },
  authenticators: { method: (pick) => (pick() < 0.5 ? 'updb' : 'cert') },
  enrollments: { method: (pick) => ['ott', 'ottca', 'updb', 'erott', 'trott'][Math.floor(pick() * 5)] },
};

const entities = ENTITIES as readonly Entity[];
/** What an entity's rendering is declared to read beyond the row (undefined: every collection). */
const readsOf = (e: Entity): readonly string[] | undefined => (e.toApi ? e.reads : []);

const newDir = tempDirs('keel-render-cache-');
let store: Store;
let svc: Services;

beforeAll(async () => {
  store = await Store.open(newDir(), buildSchema());
  const proposer = new LocalProposer(store, { maxQueued: 100, sync: false });
  svc = new Services(
    // the test writes to every collection by name at run time: the store is used untyped here
    store as unknown as KeelStore,
    proposer,
    { sessionTimeout_ms: 60_000, apiBaseUrls: [], instanceId: 'x', clustered: false },
    manualClock(),
  );
  svc.sessions = new SessionService(svc);
});

afterAll(async () => {
  await store?.close();
});

/** A random value of a stored field: references name existing rows, so that the store takes the write. */
function randomValue(def: EntityDef, field: string, f: FieldDef, pick: () => number): unknown {
  const shaped = SHAPED[def.name]?.[field];
  if (shaped) return shaped(pick);
  const word = () => WORDS[Math.floor(pick() * WORDS.length)]!;
  const target = f.ref?.entity ?? f.roles?.entity;
  if (target) {
    const ids = [...store.collection(target).scan()].map((r) => r.id);
    const id = ids.length > 0 ? ids[Math.floor(pick() * ids.length)]! : null;
    if (f.roles) return id ? [`@${id}`, `#${word()}`] : [`#${word()}`];
    return id;
  }
  const scalar = (): unknown => {
    switch (f.type) {
      case 'string':
        return f.unique ? `${word()}-${Math.floor(pick() * 1e6)}` : word();
      case 'number':
        return Math.floor(pick() * 10);
      case 'bool':
        return pick() < 0.5;
      case 'datetime':
        return AT;
      default:
        return {};
    }
  };
  return f.set ? [scalar()] : scalar();
}

function rowData(def: EntityDef, pick: () => number): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const [name, f] of Object.entries(def.fields)) {
    const v = randomValue(def, name, f, pick);
    if (v !== null) data[name] = v;
  }
  return data;
}

function randomWrite(pick: () => number): Command {
  const e = entities[Math.floor(pick() * entities.length)]!;
  const rows = [...store.collection(e.name).scan()];
  const kind = rows.length === 0 ? 0 : pick();
  const id = `x${Math.floor(pick() * ID_POOL)}`;
  if (kind < 0.3) return { op: 'create', entity: e.name, id, data: rowData(e.def, pick), at: AT };
  const row = rows[Math.floor(pick() * rows.length)]!;
  if (kind < 0.45) return { op: 'delete', entity: e.name, id: row.id, at: AT };
  const fields = Object.entries(e.def.fields);
  const set: Record<string, unknown> = {};
  // names are what other renderings show most
  const name = e.def.fields.name;
  if (name && pick() < 0.5) set.name = randomValue(e.def, 'name', name, pick);
  for (let i = 0; i < 2 && fields.length > 0; i++) {
    const [name, f] = fields[Math.floor(pick() * fields.length)]!;
    set[name] = randomValue(e.def, name, f, pick);
  }
  return { op: 'update', entity: e.name, id: row.id, set, at: AT };
}

/** Every row's fresh rendering, by row object. */
function freshRenders(): Map<Row, string> {
  const out = new Map<Row, string>();
  for (const e of entities) {
    for (const row of store.collection(e.name).scan()) out.set(row, JSON.stringify(e.render(row, svc)));
  }
  return out;
}

describe('rendering cache', () => {
  it('declarations are complete, and cached renderings equal fresh ones, under random writes', async () => {
    const pick = rng(7);
    for (let round = 0; round < ROWS_PER_COLLECTION; round++) {
      for (const e of entities) {
        const cmd: Command = { op: 'create', entity: e.name, id: `x${round}`, data: rowData(e.def, pick), at: AT };
        // one at a time: later rows reference earlier ones
        await store.applyGroup([cmd], { sync: false });
      }
    }
    const written = new Set<string>();
    let checked = 0;
    let before = freshRenders();
    for (let step = 0; step < STEPS; step++) {
      const stamps = new Map(entities.map((e) => [e.name, store.stampOf([e.name])]));
      const [result] = await store.applyGroup([randomWrite(pick)], { sync: false });
      if (!result!.ok) continue;
      const changed = entities.filter((e) => store.stampOf([e.name]) !== stamps.get(e.name)).map((e) => e.name);
      for (const c of changed) written.add(c);
      const after = freshRenders();
      for (const e of entities) {
        const reads = readsOf(e);
        if (!reads || changed.some((c) => reads.includes(c))) continue;
        for (const row of store.collection(e.name).scan()) {
          const was = before.get(row);
          if (was === undefined) continue; // a new or changed row
          expect(after.get(row), `${e.name} ${row.id} after a write to ${changed}`).toBe(was);
          checked++;
        }
      }
      for (const e of entities) {
        for (const row of store.collection(e.name).scan()) {
          expect(e.renderJson(row, svc), `${e.name} ${row.id}: cached vs fresh`).toBe(after.get(row));
        }
      }
      before = after;
    }
    // the random writes reached every collection, and the check had rows to look at
    expect([...written].sort()).toEqual(entities.map((e) => e.name).sort());
    expect(checked).toBeGreaterThan(1000);
  });

  it('every rendering with a toApi declares what it reads, or that it is never cached (then no reads)', () => {
    for (const e of entities.filter((x) => x.toApi)) {
      if (e.cacheable === false) expect(e.reads, `${e.name}: never cached, yet declares reads`).toBeUndefined();
      else expect(e.reads, `${e.name}: declares neither reads nor cacheable: false`).toBeDefined();
    }
  });

  it('an entity never cached renders afresh on every call; any other answers a repeat from its cache', async () => {
    const pick = rng(11);
    for (const e of entities) {
      // a row left by the random writes, or one created here
      if (store.collection(e.name).size === 0) {
        const cmd: Command = { op: 'create', entity: e.name, id: 'fresh', data: rowData(e.def, pick), at: AT };
        expect((await store.applyGroup([cmd], { sync: false }))[0]!.ok, e.name).toBe(true);
      }
      const row = store.collection(e.name).scan().next().value as Row;
      const perRow = typeof e.cacheable === 'function' && !e.cacheable(row);
      e.renderJson(row, svc);
      const render = vi.spyOn(e, 'render');
      try {
        e.renderJson(row, svc);
        e.renderJson(row, svc);
        expect(render, e.name).toHaveBeenCalledTimes(e.cacheable === false || perRow ? 2 : 0);
      } finally {
        render.mockRestore();
      }
    }
  });

  it('a router going online shows in its rendering with no write', () => {
    const presence = routerPresenceOf(svc);
    const byName = new Map<string, Entity>(entities.map((e) => [e.name, e]));
    const versionInfo = { version: 'v1', revision: 'r', buildDate: 'd', os: 'linux', arch: 'amd64' };
    for (const name of ['edge-routers', 'transit-routers']) {
      const e = byName.get(name)!;
      const row = store.collection(name).scan().next().value as Row;
      const online = () => JSON.parse(e.renderJson(row, svc)).isOnline;
      expect(online(), name).toBe(false);
      presence.connecting(row.id);
      presence.hello({ routerId: row.id, hostname: 'h', protocols: {}, versionInfo, connectedAt_ms: 0 });
      try {
        expect(online(), name).toBe(true);
      } finally {
        presence.disconnected(row.id);
      }
      expect(online(), name).toBe(false);
    }
  });

  it('every declared name is a collection', () => {
    const names = new Set(entities.map((e) => e.name));
    for (const e of entities) for (const r of readsOf(e) ?? []) expect(names, `${e.name} reads ${r}`).toContain(r);
  });
});
