/**
 * Compile-time tests of the typed entity machinery (docs/architecture.md, "Typed rows"): `npm run typecheck`
 * (tsc) compiles this file, and each `@ts-expect-error` fails the build if its line stops being an error. Nothing
 * here runs (vitest collects `*.test.ts` only).
 */
import { requireRow } from '../../src/api/entity.js';
import type { Services } from '../../src/api/services.js';
import { ref } from '../../src/model/common.js';
import { identities } from '../../src/model/identity.js';
import type { ApplyContext, Change, Command, Expect, RowFor, Store } from '../../src/model/rows.js';

export function entityNamesAreChecked(svc: Services, store: Store, ctx: ApplyContext): void {
  svc.get('identities', 'x');
  // @ts-expect-error a misspelt entity name
  svc.get('identitys', 'x');
  // @ts-expect-error a misspelt entity name
  svc.require('service', 'x');
  // @ts-expect-error a misspelt entity name
  store.lookup('api-session', 'token', 't');
  // @ts-expect-error a misspelt entity name
  store.collection('config').scan();
  // @ts-expect-error a misspelt entity name
  const create: Command = { op: 'create', entity: 'edge-router', id: 'x', data: {}, at: '' };
  // @ts-expect-error a misspelt entity name in a batch
  const batch: Command = { op: 'batch', ops: [{ op: 'delete', entity: 'sessionz', id: 'x', at: '' }] };
  // @ts-expect-error a misspelt entity name
  const expect: Expect = { check: 'absent', entity: 'identity', field: 'name', value: 'x', reason: '', apiCode: 'X' };
  // @ts-expect-error a condition that says neither how it is answered (`apiCode`) nor on which field (`errorField`)
  const unanswered: Expect = { check: 'absent', entity: 'identities', field: 'name', value: 'x', reason: '' };
  // @ts-expect-error a misspelt entity name in a custom command's write
  ctx.delete('revocation', 'x', '');
  // @ts-expect-error a misspelt entity name in a reference
  ref('config-type', 'x', undefined);
  void [create, batch, expect, unanswered];
}

export function rowsAreTyped(svc: Services, ctx: ApplyContext): void {
  const identity = svc.require('identities', 'x');
  const name: string | null | undefined = identity.name;
  const admin: boolean | null | undefined = identity.isAdmin;
  const attributes: string[] | null | undefined = identity.roleAttributes;
  // @ts-expect-error a wrong field type: `name` is a string
  const wrong: number | null | undefined = identity.name;
  // @ts-expect-error a wrong field type: `roleAttributes` is a list of strings
  const wrongList: number[] | null | undefined = identity.roleAttributes;
  // the declaration's `requireRow` and the transaction read the same types
  const same: RowFor<'identities'> = requireRow(identities, svc, 'x');
  const inTxn = ctx.txn.get('services', 'x');
  const configs: string[] | null | undefined = inTxn?.configs;
  // @ts-expect-error a wrong field type: `configs` is a list of ids
  const wrongConfigs: string | null | undefined = inTxn?.configs;
  // a field whose body schema is richer than its FieldType is typed by the schema (posture checks' `processes`)
  const check = svc.require('posture-checks', 'x');
  const path: string | undefined = check.processes?.[0]?.path;
  void [name, admin, attributes, wrong, wrongList, same, configs, wrongConfigs, path];
}

export function changesAreTyped(c: Change): void {
  // narrowing on the entity types the rows
  if (c.entity === 'identities') {
    const attributes: string[] | null | undefined = c.after?.roleAttributes;
    void attributes;
  }
  // @ts-expect-error a misspelt entity name in a comparison
  if (c.entity === 'identity') return;
}
