import { randomBytes } from 'node:crypto';
import type { Services } from './api/services.js';
import { hashPassword } from './auth/password.js';
import { DEFAULT_AUTH_POLICY } from './model/auth-policy.js';
import { BUILTIN_CONFIG_SCHEMAS } from './model/builtin-config-schemas.js';
import { BUILTIN_CONFIG_TYPES } from './model/config-type.js';
import type { Command } from './model/rows.js';
import { signingKeyCommand } from './pki/enrollment-jwt.js';
import { shortId } from './util/ids.js';

export const DEFAULT_ADMIN_USERNAME = 'admin';
export const DEFAULT_ADMIN_NAME = 'Default Admin';

/** A strong generated password: 24 characters from a 64-symbol alphabet (144 bits). */
export function generatePassword(): string {
  return randomBytes(18).toString('base64url');
}

export function isInitialized(svc: Services): boolean {
  return svc.store.collection('identity-types').size > 0;
}

/**
 * First start: the built-in rows OpenZiti's `edge init` creates (identity types, default auth policy, built-in
 * config types) and the default admin with its updb authenticator — one atomic command.
 */
export async function initialize(svc: Services, adminPassword: string): Promise<void> {
  if (adminPassword.length < 5 || adminPassword.length > 100) {
    throw new Error('the admin password must be 5 to 100 characters long');
  }
  const at = svc.nowIso();
  const adminId = shortId();
  const ops: Command[] = [
    { op: 'create', entity: 'identity-types', id: 'Default', data: { name: 'Default' }, at },
    { op: 'create', entity: 'identity-types', id: 'Router', data: { name: 'Router' }, at },
    { op: 'create', entity: 'auth-policies', id: 'default', data: structuredClone(DEFAULT_AUTH_POLICY), at },
    // the global controller settings (docs/operations.md), a system row as in OpenZiti
    { op: 'create', entity: 'controller-settings', id: 'global', data: { isSystem: true, oidc: {} }, at, system: true },
    await signingKeyCommand(at),
    ...BUILTIN_CONFIG_TYPES.map(
      (c): Command => ({
        op: 'create',
        entity: 'config-types',
        id: c.id,
        data: { name: c.name, target: c.target, schema: structuredClone(BUILTIN_CONFIG_SCHEMAS[c.name] ?? {}) },
        at,
      }),
    ),
    {
      op: 'create',
      entity: 'identities',
      id: adminId,
      at,
      data: {
        name: DEFAULT_ADMIN_NAME,
        typeId: 'Default',
        isAdmin: true,
        isDefaultAdmin: true,
        authPolicyId: 'default',
        roleAttributes: [],
      },
    },
    {
      op: 'create',
      entity: 'authenticators',
      id: shortId(),
      at,
      data: {
        method: 'updb',
        identityId: adminId,
        username: DEFAULT_ADMIN_USERNAME,
        password: await hashPassword(adminPassword),
        methodKey: `${adminId}:updb`,
      },
    },
  ];
  await svc.write({ op: 'batch', ops });
}
