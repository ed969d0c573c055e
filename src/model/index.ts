import { Schema } from '../../storage/schema.js';
import type { Entity } from '../api/entity.js';
import { apiSessions, expireSessions, touchSessions } from './api-session.js';
import { authPolicies } from './auth-policy.js';
import { authenticators } from './authenticator.js';
import { configTypes } from './config-type.js';
import { controllerKeys, enrollments } from './enrollment.js';
import { identities } from './identity.js';
import { identityTypes } from './identity-type.js';

/** Every entity type Keel stores, in one list: the store schema and the CRUD operations both come from it. */
export const ENTITIES: Entity[] = [
  identityTypes,
  authPolicies,
  identities,
  authenticators,
  apiSessions,
  configTypes,
  enrollments,
  controllerKeys,
];

/** Named deterministic state transitions beyond plain create/update/delete. */
export const CUSTOM_COMMANDS = { touchSessions, expireSessions };

export function buildSchema(): Schema {
  return new Schema(
    ENTITIES.map((e) => e.def),
    CUSTOM_COMMANDS,
  );
}
