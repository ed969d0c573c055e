/**
 * Seeded, deterministic generators for the API fuzz suite (test/api/fuzz.test.ts) and the ZitiQL fuzz suite:
 * the spec's operations with their parameters, values derived from a request schema, and the mutations made of
 * them (bodies, raw JSON texts, path ids, query strings, ZitiQL filters). Every generator takes the PRNG, so one
 * seed replays one run exactly.
 */
import { loadSpec, type SpecName } from './spec.js';

export type Rand = () => number;

/** Seeds every CI run uses; `KEEL_FUZZ_RUNS=n` adds n more (from `KEEL_FUZZ_SEED`, default: the clock). */
export function fuzzSeeds(fixed: readonly number[]): number[] {
  const runs = Number(process.env.KEEL_FUZZ_RUNS ?? 0);
  const single = process.env.KEEL_FUZZ_SEED;
  if (single !== undefined && runs === 0) return [Number(single)];
  const start = single !== undefined ? Number(single) : Date.now() % 1_000_000_000;
  const extra = Array.from({ length: Number.isSafeInteger(runs) && runs > 0 ? runs : 0 }, (_, i) => start + i);
  return [...new Set([...fixed, ...extra])];
}

export function pick<T>(r: Rand, xs: readonly T[]): T {
  if (xs.length === 0) throw new Error('pick from an empty list');
  return xs[Math.floor(r() * xs.length)]!;
}

export function int(r: Rand, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

// ---------------------------------------------------------------------------------------------------------------
// The spec's operations

export interface SpecParam {
  name: string;
  in: 'path' | 'query' | 'body' | 'header';
  required: boolean;
  type?: string;
  enum?: unknown[];
  schema?: any;
}

export interface FuzzOp {
  spec: SpecName;
  method: string;
  path: string;
  operationId: string;
  params: SpecParam[];
  body: SpecParam | undefined;
}

function resolveParam(doc: any, p: any): SpecParam {
  if (p.$ref) return resolveParam(doc, doc.parameters[String(p.$ref).replace('#/parameters/', '')]);
  return { name: p.name, in: p.in, required: p.required === true, type: p.type, enum: p.enum, schema: p.schema };
}

/** Every operation of a spec with its (resolved) parameters, in the spec's order. */
export function fuzzOperations(spec: SpecName): FuzzOp[] {
  const doc = loadSpec(spec);
  const out: FuzzOp[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
      const op = item[method];
      if (!op) continue;
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p) => resolveParam(doc, p));
      out.push({
        spec,
        method: method.toUpperCase(),
        path,
        operationId: op.operationId ?? `${method} ${path}`,
        params,
        body: params.find((p) => p.in === 'body'),
      });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Values from a schema

const MAX_GEN_DEPTH = 6;

/** The schema behind `$ref`s, with `allOf` members merged into one object schema. */
export function resolveSchema(doc: any, schema: any, depth = 0): any {
  if (schema === undefined || schema === null || depth > 20) return {};
  if (schema.$ref)
    return resolveSchema(doc, doc.definitions[String(schema.$ref).replace('#/definitions/', '')], depth + 1);
  if (Array.isArray(schema.allOf)) {
    const merged: any = { type: 'object', properties: {}, required: [] };
    for (const part of schema.allOf) {
      const s = resolveSchema(doc, part, depth + 1);
      Object.assign(merged.properties, s.properties ?? {});
      merged.required.push(...(s.required ?? []));
      if (s.additionalProperties !== undefined) merged.additionalProperties = s.additionalProperties;
      if (s.type && s.type !== 'object') return s;
    }
    return { ...schema, ...merged, allOf: undefined };
  }
  return schema;
}

function genString(r: Rand, s: any): string {
  if (s.format === 'date-time') return new Date(Date.UTC(2030, 0, int(r, 1, 28))).toISOString();
  if (s.format === 'uri' || s.format === 'url') return `https://fuzz.example/${int(r, 0, 999)}`;
  return `fz-${Math.floor(r() * 1e9).toString(36)}`;
}

/** A value that mostly satisfies `schema` (required properties, enums, formats, bounds); some optional parts. */
export function generate(doc: any, schema: any, r: Rand, depth = 0): unknown {
  const s = resolveSchema(doc, schema);
  if (Array.isArray(s.enum) && s.enum.length > 0) return pick(r, s.enum);
  const type = s.type ?? (s.properties ? 'object' : 'string');
  switch (type) {
    case 'string':
      return genString(r, s);
    case 'integer':
      return int(r, typeof s.minimum === 'number' ? s.minimum : 0, typeof s.maximum === 'number' ? s.maximum : 100);
    case 'number':
      return r() * 100;
    case 'boolean':
      return r() < 0.5;
    case 'array': {
      if (depth >= MAX_GEN_DEPTH) return [];
      return Array.from({ length: int(r, 0, 2) }, () => generate(doc, s.items ?? {}, r, depth + 1));
    }
    case 'object': {
      const out: Record<string, unknown> = {};
      if (depth >= MAX_GEN_DEPTH) return out;
      const required: string[] = s.required ?? [];
      for (const [k, v] of Object.entries<any>(s.properties ?? {})) {
        if (required.includes(k) || r() < 0.4) out[k] = generate(doc, v, r, depth + 1);
      }
      if (s.additionalProperties && typeof s.additionalProperties === 'object' && r() < 0.5) {
        out[`k${int(r, 0, 9)}`] = generate(doc, s.additionalProperties, r, depth + 1);
      }
      return out;
    }
    default:
      return genString(r, s);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Hostile values

/** Strings no handler should choke on: controls, NUL, surrogate pairs, RTL, combining marks, huge, path tricks. */
export const WEIRD_STRINGS: readonly string[] = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\u202eevil',
  '😀'.repeat(50),
  'e\u0301'.repeat(200),
  '\ufeffbom',
  '../../etc/passwd',
  '%00',
  '<script>alert(1)</script>',
  "' or 1=1 --",
  '__proto__',
  'constructor',
  '\r\nx-injected: 1',
  '-1',
  'null',
  'x'.repeat(70_000),
];

/** A value of each JSON type other than `not`'s (for wrong-type mutations). */
export function wrongTypeValue(r: Rand, current: unknown): unknown {
  const options: unknown[] = [
    'str',
    -1,
    1.5,
    2 ** 64,
    true,
    [],
    ['x', 1, null],
    {},
    { nested: { deeper: [1] } },
  ].filter((v) => typeof v !== typeof current || Array.isArray(v) !== Array.isArray(current));
  return pick(r, options);
}

function nest(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? { a: v } : [v];
  return v;
}

/** One mutation of a body: the new body (a JSON value) and what was done. */
export interface BodyMutation {
  what: string;
  body: unknown;
}

/** Mutations of an object body (its keys may be none). */
export function mutateBody(r: Rand, base: unknown, requiredKeys: readonly string[]): BodyMutation {
  const obj =
    base !== null && typeof base === 'object' && !Array.isArray(base) ? (base as Record<string, unknown>) : {};
  const keys = Object.keys(obj);
  const key = keys.length > 0 ? pick(r, keys) : 'name';
  const kind = int(r, 0, 14);
  const copy = { ...obj };
  switch (kind) {
    case 13:
      return { what: 'the generated body', body: copy };
    case 14:
      for (const k of keys) if (typeof copy[k] === 'string') copy[k] = pick(r, WEIRD_STRINGS);
      return { what: 'weird strings in every string field', body: copy };
    case 0:
      copy[key] = wrongTypeValue(r, obj[key]);
      return { what: `wrong type for ${key}`, body: copy };
    case 1: {
      const req = requiredKeys.length > 0 ? pick(r, requiredKeys) : key;
      delete copy[req];
      return { what: `missing ${req}`, body: copy };
    }
    case 2:
      copy[pick(r, ['extraField', '__proto__', 'constructor', 'id', 'createdAt', '_links', 'isDefaultAdmin'])] = pick(
        r,
        ['x', 1, { polluted: true }, null],
      );
      return { what: 'extra field', body: copy };
    case 3:
      copy[key] = null;
      return { what: `null ${key}`, body: copy };
    case 4:
      copy[key] = 'x'.repeat(int(r, 10_000, 200_000));
      return { what: `huge string in ${key}`, body: copy };
    case 5:
      copy[key] = Array.from({ length: int(r, 1_000, 20_000) }, (_, i) => `v${i}`);
      return { what: `huge array in ${key}`, body: copy };
    case 6:
      copy[key] = pick(r, [1e308, -1e308, 2 ** 63, -(2 ** 63), 2 ** 53 + 2, -0, 1e-320, 65536, -1, 0.5]);
      return { what: `extreme number in ${key}`, body: copy };
    case 7:
      copy[key] = nest(int(r, 20, 120));
      return { what: `deep nesting in ${key}`, body: copy };
    case 8:
      copy[key] = pick(r, WEIRD_STRINGS);
      return { what: `weird string in ${key}`, body: copy };
    case 9:
      return { what: 'body of another type', body: pick(r, [null, [], [obj], 'str', 0, true]) };
    case 10:
      copy[key] = { [pick(r, ['$ne', '__proto__', ''])]: 1 };
      return { what: `object in ${key}`, body: copy };
    case 11:
      copy[key] = [pick(r, WEIRD_STRINGS), null, 1, {}];
      return { what: `mixed array in ${key}`, body: copy };
    default:
      return { what: 'empty object', body: {} };
  }
}

/** Raw request texts JSON.stringify cannot produce: broken JSON, lone surrogates, duplicate keys, BOMs, NULs. */
export function rawBody(r: Rand, base: unknown): { what: string; raw: string } {
  const text = JSON.stringify(base ?? {});
  const key = base && typeof base === 'object' ? (Object.keys(base)[0] ?? 'name') : 'name';
  const options: [string, () => string][] = [
    ['truncated JSON', () => text.slice(0, Math.max(1, Math.floor(text.length * r())))],
    ['trailing garbage', () => `${text}}garbage`],
    ['single quotes', () => text.replaceAll('"', "'")],
    ['empty body', () => ''],
    ['whitespace body', () => ' \n\t '],
    ['BOM prefix', () => `\ufeff${text}`],
    ['NUL byte', () => `${text.slice(0, 1)}\u0000${text.slice(1)}`],
    ['lone surrogates', () => `{"${key}":"\\ud800x\\udfff","k\\udbff":"\\ud83d"}`],
    ['duplicate keys', () => `{"${key}":"a","${key}":1,"${key}":{"x":[]}}`],
    ['NaN/Infinity', () => `{"${key}":NaN,"b":Infinity}`],
    ['big exponent', () => `{"${key}":1e999999}`],
    ['integer beyond 2^53', () => `{"${key}":9007199254740993,"n":-99999999999999999999999}`],
    ['comments', () => `/* c */${text}`],
    ['deep arrays', () => `${'['.repeat(int(r, 65, 20_000))}${']'.repeat(int(r, 0, 65))}`],
    ['invalid escape', () => `{"${key}":"\\x41\\u12"}`],
    ['control chars in string', () => `{"${key}":"a\tb\nc"}`],
    ['invalid UTF-8', () => `{"${key}":"\u00ff\u00fe"}`],
  ];
  const [what, make] = pick(r, options);
  return { what, raw: make() };
}

/**
 * Broken certificates and CSRs made from a real PEM certificate: truncated, damaged base64, wrong labels, a
 * certificate where a CSR belongs, several blocks, an empty block, junk around the armour.
 */
export function hostilePems(certPem: string): string[] {
  const body = certPem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, '');
  const armour = (label: string, b64: string) => `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
  return [
    certPem,
    certPem.slice(0, Math.floor(certPem.length / 2)),
    armour('CERTIFICATE', `${body.slice(0, 40)}!!!!${body.slice(44)}`),
    armour('CERTIFICATE', body.slice(0, body.length - 8)),
    armour('CERTIFICATE REQUEST', body),
    armour('PRIVATE KEY', body),
    armour('CERTIFICATE', ''),
    armour('CERTIFICATE', Buffer.from('not DER at all').toString('base64')),
    `${certPem}${certPem}${certPem}`,
    `junk before\n${certPem}junk after`,
    armour('CERTIFICATE', 'A'.repeat(200_000)),
    certPem.replaceAll('\n', '\r\n'),
    '-----BEGIN CERTIFICATE-----',
  ];
}

/** Content types other than plain `application/json` (some valid variants, most refused). */
export const CONTENT_TYPES: readonly string[] = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=utf-16',
  'APPLICATION/JSON',
  'application/json;;;',
  'json',
  ';',
  'application/jsonx',
  'application/problem+json',
  'application/json, text/plain',
  '*/*',
];

/** Path ids nobody stored, and ids that try the router: huge, encoded slashes, dot segments, NUL, bad UTF-8. */
export const WEIRD_IDS: readonly string[] = [
  'fz-unknown-id',
  'x'.repeat(5_000),
  '..',
  '.',
  '%2e%2e',
  'a%2Fb',
  '%2F',
  '..%2F..%2Fetc',
  '%00',
  '%ED%A0%80',
  '%FF%FE',
  '%E6%97%A5%E6%9C%AC',
  '__proto__',
  'constructor',
  '%20',
  '%25',
  "'",
  '-1',
  '0',
  '%3Cscript%3E',
  'id%3Fx%3D1',
  'id%23frag',
];

// ---------------------------------------------------------------------------------------------------------------
// Query strings and ZitiQL

/** A filterable identifier and its type (`set` symbols need anyOf/allOf/count/isEmpty; `?`: names nothing). */
export type FuzzField = readonly [name: string, type: 'string' | 'number' | 'bool' | 'datetime' | 'set' | '?'];

/** Identifiers of the API's entities, and some that name nothing. */
export const API_FIELDS: readonly FuzzField[] = [
  ['id', 'string'],
  ['name', 'string'],
  ['createdAt', 'datetime'],
  ['tags.env', 'string'],
  ['isAdmin', 'bool'],
  ['roleAttributes', 'set'],
  ['nope', '?'],
  ['type.name', 'string'],
  ['a.b.c.d', '?'],
];

const CMP = ['=', '!=', '<', '<=', '>', '>=', 'contains', 'icontains', 'not contains', 'in', 'not in', 'between'];

function anyLiteral(r: Rand): string {
  return pick(r, [
    '"x"',
    '"with \\" quote"',
    '""',
    '1',
    '-2.5e3',
    '9999999999999999999999999',
    'true',
    'false',
    'null',
    'datetime(2024-01-01T00:00:00Z)',
    'datetime(garbage)',
    '["a","b"]',
    '[1,2,3]',
    '[]',
    `"${'é'.repeat(int(r, 1, 20))}"`,
  ]);
}

function stringLit(r: Rand): string {
  return pick(r, ['"x"', '"web"', '""', '"with \\" quote"', `"${'é'.repeat(int(r, 1, 5))}"`, '"prod"']);
}
function numberLit(r: Rand): string {
  return pick(r, ['0', '1', '-2.5e3', '10', '9999999999999999999999999', '0.5']);
}
function dateLit(r: Rand): string {
  return pick(r, [
    'datetime(2024-01-01T00:00:00Z)',
    'datetime(2023-12-31T23:00:00-02:00)',
    'datetime(2030-01-01T00:00:00.5Z)',
  ]);
}

/** An operation that type-checks for a field of `type` (its left-hand side given). */
function typedOperation(r: Rand, lhs: string, type: 'string' | 'number' | 'datetime' | 'bool'): string {
  const lit = type === 'string' ? stringLit : type === 'number' ? numberLit : dateLit;
  if (type === 'bool') return `${lhs} ${pick(r, ['=', '!='])} ${pick(r, ['true', 'false', 'null'])}`;
  const k = int(r, 0, 4);
  if (k === 0) return `${lhs} ${pick(r, ['=', '!='])} ${pick(r, [lit(r), 'null'])}`;
  if (k === 1 && type !== 'string') return `${lhs} ${pick(r, ['', 'not '])}between ${lit(r)} and ${lit(r)}`;
  if (k === 2)
    return `${lhs} ${pick(r, ['in', 'not in'])} [${Array.from({ length: int(r, 1, 3) }, () => lit(r)).join(', ')}]`;
  if (k === 3 && type === 'string')
    return `${lhs} ${pick(r, ['contains', 'icontains', 'not contains', 'not icontains'])} ${lit(r)}`;
  return `${lhs} ${pick(r, ['<', '<=', '>', '>='])} ${lit(r)}`;
}

/** A ZitiQL text from the grammar (REFERENCE §4.2): mostly well-typed for `fields`, sometimes wrong somewhere. */
export function grammarFilter(r: Rand, fields: readonly FuzzField[] = API_FIELDS, depth = 0): string {
  const sub = () => grammarFilter(r, fields, depth + 1);
  const atom = (): string => {
    const k = int(r, 0, 11);
    const [field, type] = pick(r, fields);
    if (k === 0) return pick(r, ['true', 'false']);
    if (k === 1) return `(${depth < 4 ? sub() : 'true'})`;
    if (k === 2) return `not ${depth < 4 ? sub() : 'true'}`;
    if (k === 3) return `${pick(r, ['anyOf', 'allOf', 'count', 'isEmpty'])}(${field}) ${pick(r, CMP)} ${anyLiteral(r)}`;
    if (k === 4) return `${field} between ${anyLiteral(r)} and ${anyLiteral(r)}`;
    if (k === 5) return `isEmpty(from ${pick(r, ['identities', 'links', 'nope'])} where ${depth < 3 ? sub() : 'true'})`;
    if (k === 6) return `${field} ${pick(r, CMP)} ${anyLiteral(r)}`;
    if (type === 'set') {
      if (k === 7) return `${pick(r, ['', 'not '])}isEmpty(${field})`;
      if (k === 8) return `count(${field}) ${pick(r, ['=', '>', '<='])} ${numberLit(r)}`;
      return typedOperation(r, `${pick(r, ['anyOf', 'allOf'])}(${field})`, 'string');
    }
    if (type === '?') return `${field} = ${anyLiteral(r)}`;
    return typedOperation(r, field, type);
  };
  let out = atom();
  const n = depth < 4 ? int(r, 0, 3) : 0;
  for (let i = 0; i < n; i++) out += ` ${pick(r, ['and', 'or', 'AND', 'Or'])} ${atom()}`;
  if (depth === 0 && r() < 0.3) out += ` sort by ${pick(r, fields)[0]} ${pick(r, ['asc', 'desc', ''])}`;
  if (depth === 0 && r() < 0.2) out += ` skip ${pick(r, ['0', '5', '-1', '99999999999'])}`;
  if (depth === 0 && r() < 0.2) out += ` limit ${pick(r, ['1', 'none', '0', '-5', '1e3'])}`;
  return out;
}

/** Byte-level damage to a text: characters dropped, duplicated, swapped or replaced with arbitrary ones. */
export function damage(r: Rand, text: string): string {
  const chars = [...text];
  const edits = int(r, 1, 4);
  for (let e = 0; e < edits; e++) {
    const at = int(r, 0, chars.length);
    const k = int(r, 0, 3);
    if (k === 0) chars.splice(at, 1);
    else if (k === 1) chars.splice(at, 0, String.fromCharCode(int(r, 0, 0xffff)));
    else if (k === 2) chars.splice(at, 0, pick(r, ['(', ')', '"', '[', ']', ',', '\\', "'", ' ', '.', '-']));
    else chars.splice(at, 0, chars.slice(at, at + int(r, 1, 10)).join(''));
  }
  return chars.join('');
}

/** Random characters (any code unit, lone surrogates included). */
export function randomChars(r: Rand, max: number): string {
  return Array.from({ length: int(r, 0, max) }, () =>
    String.fromCharCode(r() < 0.7 ? int(r, 0x20, 0x7e) : int(r, 0, 0xffff)),
  ).join('');
}

/** Filters that stress the parser's bounds: long, deeply nested, many `in` values, repeated operators. */
export function pathologicalFilter(r: Rand): string {
  const n = int(r, 100, 3_000);
  return pick(r, [
    `${'('.repeat(n)}true${')'.repeat(n)}`,
    `${'not '.repeat(n)}true`,
    Array.from({ length: n }, () => 'true').join(' and '),
    Array.from({ length: n }, (_, i) => `name = "${i}"`).join(' or '),
    `id in [${Array.from({ length: n }, (_, i) => `"${i}"`).join(',')}]`,
    `name = "${'\\"'.repeat(n)}"`,
    `${'a.'.repeat(n)}b = 1`,
    `name contains "${'x'.repeat(n * 10)}"`,
    `isEmpty(${'from identities where isEmpty('.repeat(Math.min(n, 200))}x${')'.repeat(Math.min(n, 200))})`,
    `true sort by ${Array.from({ length: n }, () => 'name').join(',')}`,
    '('.repeat(n),
    '"'.repeat(n),
  ]);
}

/** Percent-encodes the UTF-8 bytes of `s` (a lone surrogate goes out as U+FFFD's bytes, as any client sends it). */
export function encodeQuery(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    out += /[A-Za-z0-9_.~-]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** A query string mutation for a list (limit, offset, filter, sort, repeated and unknown parameters). */
export function queryMutation(r: Rand, names: readonly string[]): { what: string; query: string } {
  const enc = encodeQuery;
  const num = () =>
    pick(r, ['-2', '-1', '0', '501', '100001', 'abc', '1e3', '9999999999999999999999', '', '0x10', ' 5', '5.5', '%']);
  const kind = int(r, 0, 8);
  switch (kind) {
    case 0:
      return { what: 'limit', query: `limit=${enc(num())}` };
    case 1:
      return { what: 'offset', query: `offset=${enc(num())}` };
    case 2:
      return { what: 'grammar filter', query: `filter=${enc(grammarFilter(r))}` };
    case 3:
      return { what: 'damaged filter', query: `filter=${enc(damage(r, grammarFilter(r)))}` };
    case 4:
      return {
        what: 'sort',
        query: `sort=${enc(pick(r, ['nope desc', 'name sideways', '', ',,,', 'name,name,name,name,name,name', 'tags.x', '"name"', 'name asc desc']))}`,
      };
    case 5:
      return { what: 'repeated params', query: `limit=1&limit=abc&offset=2&offset=-1&filter=true&filter=${enc('(')}` };
    case 6:
      return {
        what: 'raw percent junk',
        query: pick(r, ['filter=%', 'filter=%ZZ', 'limit=%ED%A0%80', '&&&=', '=x', 'filter']),
      };
    case 7: {
      const name = names.length > 0 ? pick(r, names) : 'unknown';
      return {
        what: `param ${name}`,
        query: `${enc(name)}=${enc(pick(r, [...WEIRD_STRINGS.slice(0, 17), 'dial', 'bind', 'x'.repeat(3000)]))}`,
      };
    }
    default:
      return { what: 'pathological filter', query: `filter=${enc(pathologicalFilter(r))}` };
  }
}
