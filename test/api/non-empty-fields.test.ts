/**
 * Fields that must hold a non-blank string (`nonEmpty` in an entity declaration: names, a terminator's binding and
 * address, a signer's issuer and audience …) are refused blank on every write — create, PUT and PATCH alike — with
 * 400 COULD_NOT_VALIDATE on the field, and the row is left as it was. Swept over every declared entity type, so a
 * new one is covered by declaring its fields; and every writable unique string that is not cleared by `''`
 * (`emptyIsNull`) must be declared `nonEmpty` (OpenZiti's unique indexes refuse empty values).
 */
import { describe, expect, it } from 'vitest';
import type { Entity } from '../../src/api/entity.js';
import { ENTITIES } from '../../src/model/index.js';
import { createRootCa } from '../../src/pki/index.js';
import { adminServer } from '../support/admin-api.js';
import { expectError } from '../support/api.js';

let seq = 0;
const uniq = (p: string) => `${p}-${++seq}`;

const { mgmt, create } = adminServer();

/** A valid create body (with a fresh name) of each entity type that has `nonEmpty` fields; also a valid PUT body. */
const BODIES: Record<string, () => Promise<Record<string, unknown>>> = {
  identities: async () => ({ name: uniq('ne-id'), type: 'User', isAdmin: false }),
  services: async () => ({ name: uniq('ne-svc'), encryptionRequired: true }),
  'edge-routers': async () => ({ name: uniq('ne-er') }),
  'transit-routers': async () => ({ name: uniq('ne-tr') }),
  'config-types': async () => ({ name: uniq('ne-ct') }),
  configs: async () => ({
    name: uniq('ne-cfg'),
    configTypeId: await create('/config-types', { name: uniq('ne-cfg-type') }),
    data: {},
  }),
  'service-policies': async () => ({ name: uniq('ne-sp'), type: 'Dial', semantic: 'AnyOf' }),
  'edge-router-policies': async () => ({ name: uniq('ne-erp'), semantic: 'AnyOf' }),
  'service-edge-router-policies': async () => ({ name: uniq('ne-serp'), semantic: 'AnyOf' }),
  'posture-checks': async () => ({ name: uniq('ne-pc'), typeId: 'DOMAIN', domains: ['corp'] }),
  'auth-policies': async () => {
    const { primary, secondary } = (await mgmt('GET', '/auth-policies/default')).body.data;
    return { name: uniq('ne-ap'), primary, secondary };
  },
  cas: async () => ({
    name: uniq('ne-ca'),
    certPem: (await createRootCa({ commonName: uniq('ne-ca-root') })).certPem,
    isAutoCaEnrollmentEnabled: false,
    isOttCaEnrollmentEnabled: false,
    isAuthEnabled: false,
    identityRoles: [],
    identityNameFormat: '[commonName]',
  }),
  'external-jwt-signers': async () => ({
    name: uniq('ne-signer'),
    enabled: true,
    issuer: uniq('https://issuer.example/ne'),
    audience: 'keel',
    jwksEndpoint: 'https://issuer.example/jwks',
    externalAuthUrl: 'https://issuer.example/auth',
  }),
  terminators: async () => ({
    service: await create('/services', { name: uniq('ne-term-svc'), encryptionRequired: true }),
    router: await create('/transit-routers', { name: uniq('ne-term-router') }),
    binding: 'edge',
    address: uniq('ne-address'),
  }),
};

/** What a PATCH body must hold beyond the field (OpenZiti's posture check patch requires its `typeId`). */
const PATCH_REQUIRES: Record<string, Record<string, unknown>> = { 'posture-checks': { typeId: 'DOMAIN' } };

const nonEmptyFields = (e: Entity) =>
  Object.entries(e.fields)
    .filter(([, f]) => f.nonEmpty === true)
    .map(([name]) => name);
const served = (e: Entity, which: 'create' | 'update' | 'patch') => e.operations?.[which] !== false && !!e[which];
const swept = (ENTITIES as readonly Entity[]).filter((e) => nonEmptyFields(e).length > 0);
const BLANKS = ['', ' \t\n'];

describe('non-empty fields', () => {
  it('every writable unique string not cleared by "" is declared nonEmpty', () => {
    const undeclared = (ENTITIES as readonly Entity[]).flatMap((e) =>
      Object.entries(e.fields)
        .filter(([, f]) => f.type === 'string' && f.unique && f.body && !f.emptyIsNull && f.nonEmpty !== true)
        .map(([name]) => `${e.name}.${name}`),
    );
    expect(undeclared).toEqual([]);
    // and the sweep below knows how to write each entity type that has such fields
    expect(swept.map((e) => e.name).filter((n) => !BODIES[n])).toEqual([]);
  });

  it.each(swept.map((e) => [e.name, e] as const))('%s: blank refused on create, PUT and PATCH', async (_n, e) => {
    const path = `/${e.name}`;
    for (const field of nonEmptyFields(e)) {
      for (const blank of BLANKS) {
        if (served(e, 'create')) {
          expectError(
            await mgmt('POST', path, { ...(await BODIES[e.name]!()), [field]: blank }),
            400,
            'COULD_NOT_VALIDATE',
            field,
          );
        }
        const body = await BODIES[e.name]!();
        const id = await create(path, body);
        const before = (await mgmt('GET', `${path}/${id}`)).body.data;
        if (served(e, 'patch')) {
          expectError(
            await mgmt('PATCH', `${path}/${id}`, { ...PATCH_REQUIRES[e.name], [field]: blank }),
            400,
            'COULD_NOT_VALIDATE',
            field,
          );
        }
        if (served(e, 'update')) {
          expectError(
            await mgmt('PUT', `${path}/${id}`, { ...body, [field]: blank }),
            400,
            'COULD_NOT_VALIDATE',
            field,
          );
        }
        expect((await mgmt('GET', `${path}/${id}`)).body.data).toEqual(before);
      }
    }
  });
});
