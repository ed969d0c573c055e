/**
 * Controller settings beyond the entity's list, detail and create (docs/operations.md): the effective settings of a
 * controller (global merged with its own), and update, patch and delete, which OpenZiti's spec serves on
 * `/controller-settings/{id}/effective`.
 */
import type { Row } from '../../storage/types.js';
import { Errors } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { ok, okEmpty } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { baseEntity, detailEnvelope, empty, tags } from '../model/common.js';
import {
  controllerSettings,
  GLOBAL_SETTINGS_ID,
  isController,
  mergeSettings,
  type OidcSettings,
  oidcSettings,
  settingsOf,
} from '../model/controller-setting.js';
import type { Command, RowFor } from '../model/rows.js';
import { s } from '../schema/s.js';

const ENTITY = 'controller-settings';
const PATH = '/controller-settings/{id}/effective';
const TAGS = ['Settings'];
const PERMISSION = 'controller-setting';

const controllerSettingEffective = s.named(
  'controllerSettingEffective',
  s.allOf(baseEntity, s.obj({ effective: controllerSettings, instance: controllerSettings })),
);
const controllerSettingUpdate = s.named('controllerSettingUpdate', s.obj({ oidc: oidcSettings, tags }));
const controllerSettingPatch = s.named('controllerSettingPatch', s.obj({ oidc: oidcSettings, tags }));

type SettingsBody = { oidc?: OidcSettings; tags?: Record<string, unknown> | null };

function notFound(id: string) {
  return Errors.NOT_FOUND({ code: 'UNHANDLED', message: `controllerSetting with id ${id} not found` });
}

/** The stored row of `id`; the global row may be absent in a store initialised before Keel had settings. */
function settingsRow(svc: Services, id: string): RowFor<'controller-settings'> | undefined {
  return svc.get(ENTITY, id);
}

/**
 * PUT replaces the settings, PATCH changes the ones given. The global row is written as a system row (it cannot be
 * deleted); a store without one gets it on its first write.
 */
async function write(svc: Services, id: string, body: SettingsBody, mode: 'update' | 'patch'): Promise<void> {
  const row = settingsRow(svc, id);
  const isGlobal = id === GLOBAL_SETTINGS_ID;
  if (!row && !isGlobal) throw notFound(id);
  const given = settingsOf({ oidc: body.oidc } as unknown as Row).oidc;
  const oidc = mode === 'update' ? given : { ...settingsOf(row).oidc, ...given };
  const set: Record<string, unknown> = { oidc };
  if (Object.hasOwn(body, 'tags')) set.tags = body.tags ?? {};
  else if (mode === 'update') set.tags = {};
  const at = svc.nowIso();
  const cmd: Command = row
    ? { op: 'update', entity: ENTITY, id, set, at, system: isGlobal }
    : { op: 'create', entity: ENTITY, id, data: { ...set, isSystem: true }, at, system: true };
  await svc.write(cmd);
}

export function controllerSettingOps(): OpDef<unknown>[] {
  const change = (method: 'PUT' | 'PATCH'): OpDef<unknown> =>
    op<SettingsBody>({
      method,
      path: PATH,
      apis: ['management'],
      operationId: method === 'PUT' ? 'updateControllerSetting' : 'patchControllerSetting',
      tags: TAGS,
      summary: method === 'PUT' ? 'Update all fields on a controller setting' : 'Update the supplied fields',
      description: 'Changes the global settings (`global`) or a controller’s own. Requires admin access.',
      access: 'admin',
      permission: PERMISSION,
      body: method === 'PUT' ? controllerSettingUpdate : controllerSettingPatch,
      bodyName: 'controllerSetting',
      responses: {
        200: { description: 'The update request was successful and the resource has been altered', schema: empty },
      },
      handler: async ({ params, body, svc }) => {
        await write(svc, params.id!, body, method === 'PUT' ? 'update' : 'patch');
        return okEmpty();
      },
    });
  return [
    op({
      method: 'GET',
      path: PATH,
      apis: ['management'],
      operationId: 'detailControllerSettingEffective',
      tags: TAGS,
      summary: 'Retrieves the effective settings of a controller',
      description:
        'The global settings merged with the controller’s own (`effective`), and its own (`instance`). Requires ' +
        'admin access.',
      access: 'admin',
      permission: PERMISSION,
      responses: {
        200: {
          description: 'The effective settings of a controller',
          schema: detailEnvelope('detailControllerSettingEffectiveEnvelope', controllerSettingEffective),
        },
      },
      handler: ({ params, svc }) => {
        const id = params.id!;
        const global = settingsRow(svc, GLOBAL_SETTINGS_ID);
        const own = id === GLOBAL_SETTINGS_ID ? global : settingsRow(svc, id);
        // a controller without settings of its own has the global ones; an id that is neither is not found
        if (!own && id !== GLOBAL_SETTINGS_ID && !isController(svc, id)) throw notFound(id);
        const basis = own ?? global;
        const at = basis?.updatedAt ?? new Date(0).toISOString();
        const out: Record<string, unknown> = {
          _links: { self: { href: `./controller-settings/${id}/effective` } },
          createdAt: basis?.createdAt ?? at,
          id,
          tags: basis?.tags ?? {},
          updatedAt: at,
          effective: mergeSettings(global, own),
        };
        if (own) out.instance = settingsOf(own);
        return ok(out);
      },
    }),
    change('PUT'),
    change('PATCH'),
    op({
      method: 'DELETE',
      path: PATH,
      apis: ['management'],
      operationId: 'deleteControllerSetting',
      tags: TAGS,
      summary: 'Delete a controller setting',
      description: 'Deletes a controller’s own settings (it then has the global ones); `global` cannot be deleted.',
      access: 'admin',
      permission: PERMISSION,
      responses: {
        200: { description: 'The delete request was successful and the resource has been removed', schema: empty },
      },
      handler: async ({ params, svc }) => {
        const id = params.id!;
        if (id === GLOBAL_SETTINGS_ID) {
          throw Errors.ENTITY_CAN_NOT_BE_DELETED({
            code: 'UNHANDLED',
            message: 'the global settings cannot be deleted',
          });
        }
        if (!settingsRow(svc, id)) throw notFound(id);
        await svc.write({ op: 'delete', entity: ENTITY, id, at: svc.nowIso() });
        return okEmpty();
      },
    }),
  ];
}
