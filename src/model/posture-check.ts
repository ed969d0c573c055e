/**
 * Posture checks (OpenZiti's OS, PROCESS, PROCESS_MULTI, DOMAIN, MAC and MFA checks): one entity type whose
 * type-specific fields depend on `typeId` (the spec's discriminated bodies). Service policies select them through
 * `postureCheckRoles`; src/model/posture.ts evaluates them against what clients report.
 */
import { fail } from '../../storage/types.js';
import { checkRoleAttributes, defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import { s } from '../schema/s.js';
import { attributes, tags } from './common.js';
import { semantic } from './policy.js';
import type { ApplyContext, RowFor } from './rows.js';

export const POSTURE_CHECK_TYPES = ['OS', 'PROCESS', 'DOMAIN', 'MAC', 'MFA', 'PROCESS_MULTI'] as const;
export type PostureCheckType = (typeof POSTURE_CHECK_TYPES)[number];
export const OS_TYPES = ['Windows', 'WindowsServer', 'Android', 'iOS', 'Linux', 'macOS'] as const;

/** The most entries one list of a posture check may hold (OpenZiti sets none; Keel bounds every list). */
export const MAX_POSTURE_ENTRIES = 100;

export const postureCheckType = s.named('postureCheckType', s.enum(POSTURE_CHECK_TYPES));
export const osType = s.named('osType', s.enum(OS_TYPES));
const strings = s.arr(s.str());
const operatingSystem = s.named('operatingSystem', s.obj({ type: osType, versions: strings }, ['type', 'versions']));
const processSchema = s.named(
  'process',
  s.obj({ hashes: strings, osType, path: s.str(), signerFingerprint: s.str() }, ['osType', 'path']),
);
const processMulti = s.named(
  'processMulti',
  s.obj({ hashes: strings, osType, path: s.str(), signerFingerprints: strings }, ['osType', 'path']),
);

/** The fields each type has beyond the common ones, and which of them create/update require. */
export const TYPE_FIELDS: Record<PostureCheckType, { fields: string[]; required: string[] }> = {
  OS: { fields: ['operatingSystems'], required: ['operatingSystems'] },
  PROCESS: { fields: ['process'], required: ['process'] },
  PROCESS_MULTI: { fields: ['processes', 'semantic'], required: ['processes', 'semantic'] },
  DOMAIN: { fields: ['domains'], required: ['domains'] },
  MAC: { fields: ['macAddresses'], required: ['macAddresses'] },
  MFA: { fields: ['timeoutSeconds', 'promptOnWake', 'promptOnUnlock', 'ignoreLegacyEndpoints'], required: [] },
};

/** MFA defaults (OpenZiti's): no timeout (-1), no prompts. */
const MFA_DEFAULTS: Record<string, unknown> = {
  timeoutSeconds: -1,
  promptOnWake: false,
  promptOnUnlock: false,
  ignoreLegacyEndpoints: false,
};

const typeSpecific = {
  operatingSystems: s.arr(operatingSystem),
  process: processSchema,
  processes: s.arr(processMulti),
  semantic,
  domains: strings,
  macAddresses: strings,
  timeoutSeconds: s.int({ minimum: -1 }),
  promptOnWake: s.bool(),
  promptOnUnlock: s.bool(),
  ignoreLegacyEndpoints: s.bool(),
};

const postureCheckFields = {
  name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
  typeId: { type: 'string', index: true, api: true },
  roleAttributes: { type: 'string', set: true, index: true, body: attributes, api: true, default: [] },
  // OpenZiti's version: 1 on create, +1 on every change
  version: { type: 'number', api: true, default: 1 },
  operatingSystems: { type: 'object', body: typeSpecific.operatingSystems },
  process: { type: 'object', body: typeSpecific.process },
  processes: { type: 'object', body: typeSpecific.processes },
  semantic: { type: 'string', body: typeSpecific.semantic },
  domains: { type: 'object', body: typeSpecific.domains },
  macAddresses: { type: 'object', body: typeSpecific.macAddresses },
  timeoutSeconds: { type: 'number', body: typeSpecific.timeoutSeconds },
  promptOnWake: { type: 'bool', body: typeSpecific.promptOnWake },
  promptOnUnlock: { type: 'bool', body: typeSpecific.promptOnUnlock },
  ignoreLegacyEndpoints: { type: 'bool', body: typeSpecific.ignoreLegacyEndpoints },
} as const satisfies EntityFields;

const common = { name: s.str(), roleAttributes: attributes, tags, typeId: postureCheckType };

const HEX = /^[0-9a-fA-F]+$/;
/** A version range entry: comparators (`>=1.2.3 <2.0.0`), alternatives joined by `||` (OpenZiti: semver ranges). */
const VERSION_COMPARATOR = /^(>=|<=|>|<|==|=|!=)?\d+(\.\d+){0,2}$/;

function bounded(field: string, list: unknown, nonEmpty = true): unknown[] {
  const items = (list as unknown[] | null | undefined) ?? [];
  if (nonEmpty && items.length === 0) throw fieldError(field, `at least one entry is required`, items);
  if (items.length > MAX_POSTURE_ENTRIES) {
    throw fieldError(field, `at most ${MAX_POSTURE_ENTRIES} entries may be given`, items.length);
  }
  return items;
}

function hexList(field: string, values: unknown): string[] {
  const out = ((values as string[] | null | undefined) ?? []).map((v) => v.toLowerCase());
  bounded(field, out, false);
  const bad = out.find((v) => !HEX.test(v));
  if (bad !== undefined) throw fieldError(field, 'must be hex encoded', bad);
  return [...new Set(out)];
}

/** Normalises a MAC address (`AA:bb-cc.dd…` → `aabbccdd…`), or null when it is not 12 hex digits. */
export function normalizeMac(value: string): string | null {
  const hex = value.replace(/[:\-.]/g, '').toLowerCase();
  return hex.length === 12 && HEX.test(hex) ? hex : null;
}

/** Parses a version range; null when invalid. Each alternative is a list of comparators that must all hold. */
export function parseVersionRange(range: string): { op: string; version: number[] }[][] | null {
  const alternatives = range.split('||').map((alt) => alt.trim().split(/\s+/).filter(Boolean));
  if (alternatives.some((alt) => alt.length === 0 || alt.some((c) => !VERSION_COMPARATOR.test(c)))) return null;
  return alternatives.map((alt) =>
    alt.map((c) => {
      const m = /^(>=|<=|>|<|==|=|!=)?(.*)$/.exec(c)!;
      return { op: m[1] ?? '=', version: m[2]!.split('.').map(Number) };
    }),
  );
}

function checkTypeFields(type: PostureCheckType, out: Record<string, unknown>): void {
  switch (type) {
    case 'OS':
      if ('operatingSystems' in out) {
        for (const [i, os] of bounded('operatingSystems', out.operatingSystems).entries()) {
          const versions = bounded(`operatingSystems.${i}.versions`, (os as { versions: unknown }).versions, false);
          for (const v of versions as string[]) {
            if (parseVersionRange(v) === null) throw fieldError(`operatingSystems.${i}.versions`, 'invalid version', v);
          }
        }
      }
      return;
    case 'PROCESS':
      if (out.process) {
        const p = { ...(out.process as Record<string, unknown>) };
        if (String(p.path).trim() === '') throw fieldError('process.path', 'path is required', p.path);
        p.hashes = hexList('process.hashes', p.hashes);
        if (p.signerFingerprint) p.signerFingerprint = hexList('process.signerFingerprint', [p.signerFingerprint])[0];
        out.process = p;
      }
      return;
    case 'PROCESS_MULTI':
      if ('processes' in out) {
        out.processes = bounded('processes', out.processes).map((raw, i) => {
          const p = { ...(raw as Record<string, unknown>) };
          if (String(p.path).trim() === '') throw fieldError(`processes.${i}.path`, 'path is required', p.path);
          p.hashes = hexList(`processes.${i}.hashes`, p.hashes);
          p.signerFingerprints = hexList(`processes.${i}.signerFingerprints`, p.signerFingerprints);
          return p;
        });
      }
      return;
    case 'DOMAIN':
      if ('domains' in out) {
        const domains = (bounded('domains', out.domains) as string[]).map((d) => d.trim().toLowerCase());
        if (domains.some((d) => d === '')) throw fieldError('domains', 'domains may not be empty', out.domains);
        out.domains = [...new Set(domains)];
      }
      return;
    case 'MAC':
      if ('macAddresses' in out) {
        out.macAddresses = [
          ...new Set(
            (bounded('macAddresses', out.macAddresses) as string[]).map((m) => {
              const mac = normalizeMac(m);
              if (mac === null) throw fieldError('macAddresses', 'invalid MAC address', m);
              return mac;
            }),
          ),
        ];
      }
      return;
    case 'MFA':
      return;
  }
}

/** The type-specific fields a body whose `typeId` names a type does not hold for it (none for another typeId). */
function fieldsOfOtherTypes(body: Record<string, unknown>): readonly string[] {
  const type = body.typeId;
  if (typeof type !== 'string' || !Object.hasOwn(TYPE_FIELDS, type)) return [];
  const own = TYPE_FIELDS[type as PostureCheckType].fields;
  return Object.keys(typeSpecific).filter((f) => !own.includes(f) && Object.hasOwn(body, f));
}

/** Renders the fields of the check's own type (those of other types are not part of its detail). */
function renderTypeFields(row: RowFor<'posture-checks'>): Record<string, unknown> {
  const type = row.typeId as PostureCheckType;
  const out: Record<string, unknown> = {};
  for (const f of TYPE_FIELDS[type]?.fields ?? []) out[f] = row[f] ?? MFA_DEFAULTS[f] ?? null;
  return out;
}

export const postureCheckDetail = detailSchema(
  'postureCheckDetail',
  s.obj({ ...typeSpecific, name: s.str(), roleAttributes: attributes, typeId: s.str(), version: s.int() }, [
    'name',
    'typeId',
    'version',
    'roleAttributes',
  ]),
);

export const postureChecks: Entity<'posture-checks', typeof postureCheckFields> = defineEntity({
  name: 'posture-checks',
  type: 'postureCheck',
  tag: 'Posture Checks',
  singular: 'PostureCheck',
  plural: 'PostureChecks',
  permission: 'posture-check',
  roleAttributesField: 'roleAttributes',
  fields: postureCheckFields,
  detail: postureCheckDetail,
  create: s.named('postureCheckCreate', s.obj({ ...typeSpecific, ...common }, ['name', 'typeId'])),
  update: s.named('postureCheckUpdate', s.obj({ ...typeSpecific, ...common }, ['name'])),
  patch: s.named('postureCheckPatch', s.obj({ ...typeSpecific, ...common }, ['typeId'])),
  toApi: renderTypeFields,
  // OpenZiti decodes a body by its `typeId` (the spec's discriminator): the fields of other types are not read
  // (ZAC's form sends every type's fields, those of other types empty)
  ignoredBodyFields: fieldsOfOtherTypes,
  reads: [],
  fromApi(body, { mode, existing, copied }) {
    const type = (mode === 'create' ? body.typeId : existing?.typeId) as PostureCheckType;
    if (mode !== 'create' && 'typeId' in body && body.typeId !== existing?.typeId) {
      throw fieldError('typeId', 'the type of a posture check cannot be changed', body.typeId);
    }
    const out: Record<string, unknown> = {};
    // only the fields of the check's type are kept; PUT and create require them
    for (const k of ['name', 'roleAttributes', 'tags', ...TYPE_FIELDS[type].fields])
      if (k in copied) out[k] = copied[k];
    if (mode !== 'patch') {
      for (const f of TYPE_FIELDS[type].required) {
        if (out[f] === undefined || out[f] === null) throw fieldError(f, `${f} is required for ${type} checks`, null);
      }
    }
    checkTypeFields(type, out);
    if ('roleAttributes' in out) out.roleAttributes = checkRoleAttributes('roleAttributes', out.roleAttributes);
    out.typeId = type;
    if (mode === 'create') {
      out.version = 1;
      out.roleAttributes ??= [];
      if (type === 'MFA') for (const [k, v] of Object.entries(MFA_DEFAULTS)) out[k] ??= v;
    }
    return out;
  },
  // every change counts, counted where it applies (two writes racing, computed from one read: one count lost)
  alsoOnUpdate: (row, _set, _svc, at) => [{ op: 'custom', name: 'countPostureCheckChange', args: { id: row.id }, at }],
});

/** Custom command, applied after an update of a posture check: its `version` counts the change. */
export function countPostureCheckChange(ctx: ApplyContext, args: { id: string }, at: string): void {
  const row = ctx.txn.get('posture-checks', args.id);
  if (!row)
    fail({ code: 'NOT_FOUND', entity: 'posture-checks', id: args.id, reason: `postureCheck ${args.id} not found` });
  ctx.update('posture-checks', args.id, { version: ((row.version as number | undefined) ?? 1) + 1 }, at);
}
