// Fixtures shared by the ZitiQL tests and bench.ts: a small hand-made table and a synthetic large one.

import type { RowSource } from './executor.js';
import { memoryRowSource } from './memory-source.js';
import { createSymbolTable, type SymbolTable } from './symbols.js';

export interface LinkRow {
  id: string;
  name: string;
  cost: number;
  up: boolean;
}

export interface FixtureRow {
  id: string;
  name: string | null;
  type: string;
  cost: number | null;
  ratio: number;
  enabled: boolean | null;
  createdAt: string;
  lastSeen: Date | number | null;
  description: string;
  roleAttributes: string[] | null;
  scores: number[];
  tags: Record<string, unknown>;
  links: LinkRow[];
}

const link = (id: string, name: string, cost: number, up: boolean): LinkRow => ({ id, name, cost, up });

export const FIXTURE_ROWS: readonly FixtureRow[] = [
  {
    id: 'a1',
    name: 'web-server',
    type: 'Router',
    cost: 10,
    ratio: 0.5,
    enabled: true,
    createdAt: '2024-01-01T00:00:00Z',
    lastSeen: new Date('2024-06-01T00:00:00Z'),
    description: 'edge',
    roleAttributes: ['web', 'prod'],
    scores: [1, 2, 3],
    tags: { env: 'prod', tier: 1, managed: true },
    links: [link('l1', 'alpha', 5, true), link('l2', 'beta', 7, false)],
  },
  {
    id: 'b2',
    name: 'Web-Client',
    type: 'Identity',
    cost: 20,
    ratio: 1.25,
    enabled: false,
    createdAt: '2024-03-15T12:30:00.250Z',
    lastSeen: null,
    description: 'laptop',
    roleAttributes: ['web'],
    scores: [],
    tags: { env: 'dev' },
    links: [],
  },
  {
    id: 'c3',
    name: 'db "main"\n',
    type: 'Router',
    cost: null,
    ratio: 2,
    enabled: null,
    createdAt: '2023-12-31T23:00:00-02:00',
    lastSeen: Date.UTC(2024, 0, 2),
    description: 'core',
    roleAttributes: null,
    scores: [5],
    tags: {},
    links: [link('l3', 'gamma', 1, true)],
  },
  {
    id: 'd4',
    name: null,
    type: 'Service',
    cost: 0,
    ratio: -1.5,
    enabled: true,
    createdAt: '2022-06-01T00:00:00Z',
    lastSeen: new Date('2023-01-01T00:00:00Z'),
    description: 'svc',
    roleAttributes: ['db', 'prod'],
    scores: [2, 4],
    tags: { env: 'prod', tier: 2 },
    links: [link('l4', 'alpha', 9, true), link('l5', 'delta', 3, true), link('l6', 'eps', 4, false)],
  },
  {
    id: 'e5',
    name: 'cache',
    type: 'Service',
    cost: 100,
    ratio: 1000,
    enabled: false,
    createdAt: '2025-01-01T00:00:00Z',
    lastSeen: null,
    description: '64',
    roleAttributes: [],
    scores: [10],
    tags: { env: 'staging', tier: '3' },
    links: [],
  },
];

export const LINK_SYMBOLS: SymbolTable = createSymbolTable({
  symbols: {
    id: { type: 'string', set: false, get: (r: LinkRow) => r.id },
    name: { type: 'string', set: false, get: (r: LinkRow) => r.name },
    cost: { type: 'number', set: false, get: (r: LinkRow) => r.cost },
    up: { type: 'bool', set: false, get: (r: LinkRow) => r.up },
  },
});

export const FIXTURE_SYMBOLS: SymbolTable = createSymbolTable({
  symbols: {
    id: { type: 'string', set: false, get: (r: FixtureRow) => r.id, indexed: true },
    name: { type: 'string', set: false, get: (r: FixtureRow) => r.name, indexed: true },
    type: { type: 'string', set: false, get: (r: FixtureRow) => r.type },
    cost: { type: 'number', set: false, get: (r: FixtureRow) => r.cost, indexed: true },
    ratio: { type: 'number', set: false, get: (r: FixtureRow) => r.ratio },
    enabled: { type: 'bool', set: false, get: (r: FixtureRow) => r.enabled },
    createdAt: { type: 'datetime', set: false, get: (r: FixtureRow) => r.createdAt },
    lastSeen: { type: 'datetime', set: false, get: (r: FixtureRow) => r.lastSeen },
    description: { type: 'string', set: false, get: (r: FixtureRow) => r.description, sortable: false },
    roleAttributes: { type: 'string', set: true, get: (r: FixtureRow) => r.roleAttributes, indexed: true },
    scores: { type: 'number', set: true, get: (r: FixtureRow) => r.scores },
    links: {
      type: 'string',
      set: true,
      get: (r: FixtureRow) => r.links.map((l) => l.id),
      relation: { symbols: LINK_SYMBOLS, rows: (r: FixtureRow) => r.links },
    },
  },
  maps: { tags: (r: FixtureRow) => r.tags },
});

export function fixtureSource(rows: readonly FixtureRow[] = FIXTURE_ROWS): RowSource<FixtureRow> {
  return memoryRowSource(rows, {
    idOf: (r) => r.id,
    indexes: {
      name: (r) => r.name,
      cost: (r) => r.cost,
      roleAttributes: (r) => r.roleAttributes,
    },
  });
}

export interface SyntheticRow {
  id: string;
  name: string;
  group: string;
  size: number;
  createdAt: string;
}

export const SYNTHETIC_SYMBOLS: SymbolTable = createSymbolTable({
  symbols: {
    id: { type: 'string', set: false, get: (r: SyntheticRow) => r.id, indexed: true },
    name: { type: 'string', set: false, get: (r: SyntheticRow) => r.name, indexed: true },
    group: { type: 'string', set: false, get: (r: SyntheticRow) => r.group, indexed: true },
    size: { type: 'number', set: false, get: (r: SyntheticRow) => r.size },
    createdAt: { type: 'datetime', set: false, get: (r: SyntheticRow) => r.createdAt },
  },
});

/** Deterministic pseudo-random rows: ids `r000000`.., names of 8 letters, 100 groups. */
export function syntheticRows(count: number): SyntheticRow[] {
  let seed = 0x2545f491;
  const random = (): number => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 0x1_0000_0000;
  };
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  const rows: SyntheticRow[] = [];
  for (let i = 0; i < count; i++) {
    let name = '';
    for (let j = 0; j < 8; j++) name += letters[Math.floor(random() * 26)];
    rows.push({
      id: `r${String(i).padStart(6, '0')}`,
      name,
      group: `g${Math.floor(random() * 100)}`,
      size: Math.floor(random() * 1_000_000),
      createdAt: new Date(Date.UTC(2020, 0, 1) + Math.floor(random() * 1e11)).toISOString(),
    });
  }
  return rows;
}

export function syntheticSource(rows: readonly SyntheticRow[]): RowSource<SyntheticRow> {
  return memoryRowSource(rows, { idOf: (r) => r.id, indexes: { name: (r) => r.name, group: (r) => r.group } });
}
