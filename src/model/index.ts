import { Schema } from '../../storage/schema.js';
import { disableIdentity, enableIdentity, recordFailedLogin } from '../auth/lockout.js';
import { apiSessions, expireSessions, touchSessions } from './api-session.js';
import { authPolicies } from './auth-policy.js';
import { authenticators } from './authenticator.js';
import { configs } from './config.js';
import { configTypes } from './config-type.js';
import { controllerKeys, enrollments } from './enrollment.js';
import { identities } from './identity.js';
import { identityTypes } from './identity-type.js';
import { mfas, useRecoveryCode, useTotp } from './mfa.js';

/** Every entity type Keel stores, in one list: the store schema and the CRUD operations both come from it. */
export const ENTITIES = [
  identityTypes,
  authPolicies,
  identities,
  authenticators,
  apiSessions,
  configTypes,
  configs,
  enrollments,
  controllerKeys,
  mfas,
] as const;

/** The name of a stored entity type (`identities`, `api-sessions`, …), derived from the declarations. */
export type EntityName = (typeof ENTITIES)[number]['name'];

/** Named deterministic state transitions beyond plain create/update/delete. */
export const CUSTOM_COMMANDS = {
  touchSessions,
  expireSessions,
  disableIdentity,
  enableIdentity,
  recordFailedLogin,
  useRecoveryCode,
  useTotp,
};

export function buildSchema(): Schema {
  return new Schema(
    ENTITIES.map((e) => e.def),
    CUSTOM_COMMANDS,
  );
}
