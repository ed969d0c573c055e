/**
 * Controller settings (docs/operations.md): the `global` settings every controller uses, and per-controller rows
 * (id = the controller's id) that override them. The settings OpenZiti defines today are its OIDC client's
 * `oidc.redirectUris` and `oidc.postLogoutUris`; Keel stores and serves them (it has no OIDC endpoint yet).
 */
import type { Row } from '../../storage/types.js';
import { defineEntity, detailSchema, type Entity, type EntityFields } from '../api/entity.js';
import { fieldError } from '../api/errors.js';
import type { Services } from '../api/services.js';
import { controllerRows } from '../ops/cluster.js';
import { s } from '../schema/s.js';
import { tags } from './common.js';
import type { RowFor } from './rows.js';

export const GLOBAL_SETTINGS_ID = 'global';
/** OpenZiti's wildcard controller id: no settings may be stored under it. */
const ANY_CONTROLLER_ID = 'any';
/** Bounds of one URI list and of one URI. */
export const MAX_URIS = 100;
const MAX_URI_LENGTH = 2048;

const uriList = s.arr(s.str({ minLength: 1, maxLength: MAX_URI_LENGTH }), { maxItems: MAX_URIS });
export const oidcSettings = s.obj({ postLogoutUris: uriList, redirectUris: uriList });
export const controllerSettings = s.named('controllerSettings', s.obj({ oidc: oidcSettings }));

export type OidcSettings = { redirectUris?: string[]; postLogoutUris?: string[] };
const OIDC_KEYS = ['redirectUris', 'postLogoutUris'] as const;

/** The settings object of a row: `{oidc: {...}}` with the lists it holds. */
export function settingsOf(row: RowFor<'controller-settings'> | undefined): { oidc: OidcSettings } {
  const oidc = (row?.oidc as OidcSettings | null | undefined) ?? {};
  const out: OidcSettings = {};
  for (const k of OIDC_KEYS) if (Array.isArray(oidc[k])) out[k] = [...oidc[k]];
  return { oidc: out };
}

/** Global merged with a controller's own: each setting the controller sets overrides the global one. */
export function mergeSettings(
  global: RowFor<'controller-settings'> | undefined,
  instance: RowFor<'controller-settings'> | undefined,
): { oidc: OidcSettings } {
  const merged = settingsOf(global);
  const own = settingsOf(instance).oidc;
  for (const k of OIDC_KEYS) if (own[k] !== undefined) merged.oidc[k] = own[k];
  return merged;
}

/** Whether `id` names a controller (this node, or a cluster member). */
export function isController(svc: Services, id: string): boolean {
  return controllerRows(svc).some((r) => r.id === id);
}

const controllerSettingsFields = {
  oidc: { type: 'object', filter: false },
} as const satisfies EntityFields;

export const controllerSettingsEntity: Entity<'controller-settings', typeof controllerSettingsFields> = defineEntity({
  name: 'controller-settings',
  type: 'controllerSetting',
  tag: 'Settings',
  singular: 'ControllerSetting',
  plural: 'ControllerSettings',
  permission: 'controller-setting',
  fields: controllerSettingsFields,
  detail: detailSchema('controllerSettingDetail', controllerSettings),
  create: s.named(
    'controllerSettingCreate',
    s.obj({ controllerId: s.str({ minLength: 1, maxLength: 128 }), oidc: oidcSettings, tags }, ['controllerId']),
  ),
  toApi: (row) => settingsOf(row),
  reads: [],
  operations: { update: false, patch: false, delete: false },
  fromApi(body, { svc }) {
    const id = body.controllerId as string;
    // OpenZiti: not `global` or `any`, and a controller that exists
    if (id === GLOBAL_SETTINGS_ID || id === ANY_CONTROLLER_ID) {
      throw fieldError('controllerId', `cannot create settings for controllers with id: ${id}`, id);
    }
    if (!isController(svc, id)) throw fieldError('controllerId', `could not locate controller with id: ${id}`, id);
    return { id, oidc: settingsOf({ oidc: body.oidc } as unknown as Row).oidc };
  },
});
