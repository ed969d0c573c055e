import { requireRow } from '../api/entity.js';
import { fieldError, notFound } from '../api/errors.js';
import { type OpContext, type OpDef, op } from '../api/op.js';
import { listEnvelope, okEmpty } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { empty, listEnvelope as listEnvelopeSchema, ref } from '../model/common.js';
import { identities } from '../model/identity.js';
import { serviceConfigDetail, serviceConfigRowId, serviceConfigSlot } from '../model/identity-service-config.js';
import type { Command } from '../model/rows.js';
import { s } from '../schema/s.js';

/** The most pairs one request may name. */
export const MAX_SERVICE_CONFIG_PAIRS = 1000;

const assignList = s.named(
  'serviceConfigsAssignList',
  s.arr(s.named('serviceConfigAssign', s.obj({ configId: s.str(), serviceId: s.str() }, ['serviceId', 'configId'])), {
    maxItems: MAX_SERVICE_CONFIG_PAIRS,
  }),
);
type Pair = { serviceId: string; configId: string };

function rowsOf(svc: Services, identityId: string) {
  return svc.store
    .lookup('identity-service-configs', 'identityId', identityId)
    .sort()
    .map((id) => svc.get('identity-service-configs', id)!);
}

/** The config type of a pair, after checking that the service and the config exist and the type targets services. */
function configTypeOf(svc: Services, pair: Pair): string {
  if (!svc.get('services', pair.serviceId)) throw notFound('service', pair.serviceId);
  const config = svc.get('configs', pair.configId);
  if (!config) throw notFound('config', pair.configId);
  const type = svc.get('config-types', config.configTypeId!);
  if (type && type.target !== 'service') {
    throw fieldError('configId', `config ${pair.configId} is not a service config`, pair.configId);
  }
  return config.configTypeId!;
}

const identityOf = (ctx: OpContext<unknown>) => requireRow(identities, ctx.svc, ctx.params.id!).id;

/**
 * `/identities/{id}/service-configs`: an identity's own configs for services (list, associate, remove); OpenZiti files
 * them under the identity (`identity.read` to list, `identity.update` to associate or remove).
 */
export function serviceConfigOps(): OpDef<unknown>[] {
  const common = {
    path: '/identities/{id}/service-configs',
    apis: ['management'] as const,
    tags: ['Identity'],
    access: 'admin' as const,
    permission: 'identity',
  };
  return [
    op({
      ...common,
      method: 'GET',
      operationId: 'listIdentitysServiceConfigs',
      summary: 'List the service configs of an identity',
      responses: {
        200: {
          description: 'A list of service configs',
          schema: listEnvelopeSchema('listServiceConfigsEnvelope', serviceConfigDetail),
        },
      },
      handler: (ctx) => {
        const rows = rowsOf(ctx.svc, identityOf(ctx));
        const items = rows.map((r) => {
          const service = ctx.svc.get('services', r.serviceId!);
          const config = ctx.svc.get('configs', r.configId!);
          return JSON.stringify({
            config: ref('configs', r.configId!, config?.name),
            configId: r.configId,
            service: ref('services', r.serviceId!, service?.name),
            serviceId: r.serviceId,
          });
        });
        return listEnvelope(items, { limit: items.length, offset: 0, totalCount: items.length }, []);
      },
    }),
    op<Pair[]>({
      ...common,
      method: 'POST',
      permissionAction: 'update',
      operationId: 'associateIdentitysServiceConfigs',
      summary: 'Associate service configs for a specific identity',
      body: assignList,
      bodyName: 'serviceConfigs',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async (ctx) => {
        const identityId = identityOf(ctx);
        const at = ctx.svc.nowIso();
        const ops: Command[] = [];
        const slots = new Map<string, Pair>();
        for (const pair of ctx.body)
          slots.set(serviceConfigSlot(identityId, pair.serviceId, configTypeOf(ctx.svc, pair)), pair);
        for (const [slot, pair] of slots) {
          // a config of the same type for the same service replaces the one there: the row's id is derived from its
          // slot (serviceConfigRowId), so that the replacement holds at apply time too (a request racing with this
          // one may fill the slot after the lookup below; its row is then the one deleted by id). The lookup finds
          // rows stored under other ids.
          const id = serviceConfigRowId(slot);
          for (const old of ctx.svc.store.lookup('identity-service-configs', 'slot', slot)) {
            if (old !== id) ops.push({ op: 'delete', entity: 'identity-service-configs', id: old, at, ifExists: true });
          }
          ops.push({ op: 'delete', entity: 'identity-service-configs', id, at, ifExists: true });
          ops.push({
            op: 'create',
            entity: 'identity-service-configs',
            id,
            data: { identityId, ...pair, slot },
            at,
          });
        }
        if (ops.length > 0) await ctx.svc.write({ op: 'batch', ops });
        return okEmpty();
      },
    }),
    op<Pair[] | undefined>({
      ...common,
      method: 'DELETE',
      permissionAction: 'update',
      operationId: 'disassociateIdentitysServiceConfigs',
      summary: 'Remove associated service configs from a specific identity',
      body: assignList,
      bodyName: 'serviceConfigIdPairs',
      bodyRequired: false,
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async (ctx) => {
        const identityId = identityOf(ctx);
        const pairs = ctx.body ?? [];
        const at = ctx.svc.nowIso();
        // no pairs: every service config of the identity
        const doomed = rowsOf(ctx.svc, identityId).filter(
          (r) => pairs.length === 0 || pairs.some((p) => p.serviceId === r.serviceId && p.configId === r.configId),
        );
        const ops: Command[] = doomed.map((r) => ({
          op: 'delete',
          entity: 'identity-service-configs',
          id: r.id,
          at,
          ifExists: true,
        }));
        if (ops.length > 0) await ctx.svc.write({ op: 'batch', ops });
        return okEmpty();
      },
    }),
  ];
}
