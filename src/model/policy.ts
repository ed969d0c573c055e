/**
 * What the three policy types (service policies, edge router policies, service edge router policies) share: role
 * lists (`#attr`, `@id`, `#all`) with OpenZiti's validation (REFERENCE §5), their `*RolesDisplay`, `semantic`, and
 * one derived role index per role list (storage/role-index.ts) that the association lists and the policy engine
 * (src/model/access.ts) read.
 */
import { RoleIndex } from '../../storage/role-index.js';
import type { Row } from '../../storage/types.js';
import {
  bodyFieldsOf,
  defineEntity,
  detailSchema,
  type Entity,
  type EntityField,
  type EntityFields,
  type EntitySpec,
} from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import type { RelationSpec } from '../api/relations.js';
import type { Services } from '../api/services.js';
import { type Schema, s } from '../schema/s.js';
import { roles } from './common.js';
import type { EntityName } from './index.js';

export const dialBind = s.named('dialBind', s.enum(['Dial', 'Bind', 'Invalid'] as const));
export const semantic = s.named('semantic', s.enum(['AllOf', 'AnyOf'] as const));
export const namedRoles = s.named('namedRoles', s.arr(s.named('namedRole', s.obj({ name: s.str(), role: s.str() }))));

/** The most entries one role list may hold (OpenZiti sets none; Keel bounds every list). */
export const MAX_ROLES = 1000;

/** A role list of a policy: which entity type it selects (by `@id` and by the entities' `roleAttributes`). */
export interface RoleList {
  /** The policy field, e.g. `identityRoles`. */
  field: string;
  /** The selected entity type (`identities`, `services`, `edge-routers`); null: not an entity Keel stores yet. */
  entity: EntityName | null;
}

/** The name of the derived index of one role list of a policy type, e.g. `service-policies.identityRoles`. */
export function roleIndexName(policies: EntityName, field: string): string {
  return `${policies}.${field}`;
}

/**
 * OpenZiti's `validateRolesAndIds`: every entry is `#…` or `@…`, and `#all` is the only entry when present. That
 * every `@id` names an existing entity is checked when the write applies (storage: FieldDef.roles).
 */
export function checkRoles(field: string, values: unknown): string[] {
  if (values === null || values === undefined) return [];
  const list = values as string[];
  if (list.length > MAX_ROLES) throw fieldError(field, `at most ${MAX_ROLES} roles may be given`, list.length);
  if (list.length > 1 && list.includes('#all')) {
    throw fieldError(field, 'if using #all, it should be the only role specified', list);
  }
  const invalid = list.filter((r) => !(r.startsWith('#') || r.startsWith('@')) || r.length < 2);
  if (invalid.length > 0) {
    throw fieldError(
      field,
      'role entries must prefixed with # (to indicate role attributes) or @ (to indicate a name or id)',
      invalid,
    );
  }
  return [...new Set(list)];
}

/** `*RolesDisplay`: `{role, name}` per entry; `@id` shows `@<name>` of the entity (its id if it is gone). */
export function rolesDisplay(
  svc: Services,
  entity: EntityName | null,
  values: unknown,
): { role: string; name: string }[] {
  const out: { role: string; name: string }[] = [];
  for (const role of (values as string[] | null | undefined) ?? []) {
    if (!role.startsWith('@') || entity === null) {
      out.push({ role, name: role });
      continue;
    }
    const row = svc.store.get(entity, role.slice(1));
    out.push({ role, name: `@${row?.name ?? role.slice(1)}` });
  }
  return out;
}

function roleField(list: RoleList): EntityField {
  return {
    type: 'string',
    set: true,
    index: true,
    ...(list.entity ? { roles: { entity: list.entity } } : {}),
    body: s.nullable(roles),
    api: true,
    default: [],
  };
}

export interface PolicySpec<N extends string> {
  name: N;
  type: string;
  tag: string;
  singular: string;
  plural: string;
  permission: string;
  /** OpenZiti's schema names: `<base>Detail`, `<base>Create`, `<base>Update`, `<base>Patch`. */
  schemaBase: string;
  roleLists: RoleList[];
  /** Fields beyond name, semantic and the role lists (e.g. a service policy's `type`), with their wire schema. */
  extraFields?: EntityFields;
  /** Detail properties beyond the stored fields and the role displays (e.g. `isSystem`). */
  extraDetail?: Record<string, Schema<unknown>>;
  /** Fields the create and update bodies require beyond name and semantic. */
  extraRequired?: string[];
  relations?: RelationSpec[];
  toApi?: EntitySpec['toApi'];
  /** What `toApi` reads (the role displays' collections are added). */
  reads?: EntitySpec['reads'];
}

/** A policy type's declaration: CRUD, role validation, displays, and one role index per role list. */
export function definePolicy<const N extends EntityName>(spec: PolicySpec<N>) {
  const fields: EntityFields = {
    name: { type: 'string', unique: true, nonEmpty: true, body: s.str(), api: true },
    semantic: { type: 'string', body: semantic, api: true, default: 'AllOf' },
    ...spec.extraFields,
  };
  for (const list of spec.roleLists) fields[list.field] = roleField(list);
  const body: Record<string, Schema<unknown>> = bodyFieldsOf(fields);
  const displays: Record<string, Schema<unknown>> = {};
  for (const list of spec.roleLists) displays[`${list.field}Display`] = namedRoles;
  const detailRequired = [
    'name',
    'semantic',
    ...Object.keys(spec.extraDetail ?? {}),
    ...(spec.extraRequired ?? []),
    ...spec.roleLists.flatMap((l) => [l.field, `${l.field}Display`]),
  ];
  const detailProps: Record<string, Schema<unknown>> = { ...displays };
  for (const [name, f] of Object.entries(fields)) if (f.body) detailProps[name] = f.body;
  for (const list of spec.roleLists) detailProps[list.field] = roles;
  Object.assign(detailProps, spec.extraDetail);
  const required = ['name', 'semantic', ...(spec.extraRequired ?? [])];
  const displayed = spec.roleLists.flatMap((l) => (l.entity === null ? [] : [l.entity]));
  return defineEntity({
    name: spec.name,
    type: spec.type,
    tag: spec.tag,
    singular: spec.singular,
    plural: spec.plural,
    permission: spec.permission,
    fields,
    detail: detailSchema(`${spec.schemaBase}Detail`, s.obj(detailProps, detailRequired)),
    create: s.named(`${spec.schemaBase}Create`, s.obj(body, required)),
    update: s.named(`${spec.schemaBase}Update`, s.obj(body, required)),
    patch: s.named(`${spec.schemaBase}Patch`, s.obj(body)),
    relations: spec.relations,
    derived: spec.roleLists
      .filter((l): l is RoleList & { entity: EntityName } => l.entity !== null)
      .map(
        (l) => () =>
          new RoleIndex({
            name: roleIndexName(spec.name, l.field),
            policy: { entity: spec.name, rolesField: l.field, semanticField: 'semantic' },
            target: { entity: l.entity, attributesField: 'roleAttributes' },
          }),
      ),
    toApi(row: Row, svc: Services) {
      const out: Record<string, unknown> = spec.toApi?.(row, svc) ?? {};
      for (const list of spec.roleLists) out[`${list.field}Display`] = rolesDisplay(svc, list.entity, row[list.field]);
      return out;
    },
    // the role displays name the rows they list; the spec's own `toApi` declares what it reads
    reads: spec.toApi && !spec.reads ? undefined : [...(spec.reads ?? []), ...displayed],
    fromApi(_body, { mode, copied }) {
      const out = { ...copied };
      for (const list of spec.roleLists) {
        if (list.field in out) out[list.field] = checkRoles(list.field, out[list.field]);
        else if (mode === 'create') out[list.field] = [];
      }
      return out;
    },
  });
}

/**
 * The two association lists an entity has through one policy type: the policies that select it (`policies`), and
 * the entities those policies select on their other role list (`targets`), e.g. an identity's service policies and
 * its services.
 */
export function relationsThrough(o: {
  /** The policy type: its declaration and collection name. */
  policy: () => Entity;
  policyName: EntityName;
  /** The role list that selects the parent entity, and the one that selects the listed far-side entities. */
  near: string;
  far: string;
  listed: () => Entity;
  /** [path, OpenZiti operation id, summary] of the policy list and of the far-side list. */
  policies: [string, string, string];
  targets: [string, string, string];
  /** The far-side list takes `policyType=dial|bind`. */
  policyType?: boolean;
}): RelationSpec[] {
  const near = roleIndexName(o.policyName, o.near);
  const far = roleIndexName(o.policyName, o.far);
  return [
    {
      path: o.policies[0],
      listed: o.policy,
      via: { index: near, side: 'policies' },
      operationId: o.policies[1],
      summary: o.policies[2],
    },
    {
      path: o.targets[0],
      listed: o.listed,
      via: { through: { policies: near, targets: far }, ...(o.policyType ? { policyType: true } : {}) },
      operationId: o.targets[1],
      summary: o.targets[2],
    },
  ];
}
