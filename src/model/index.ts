import type { DerivedIndexFactory } from '../../storage/derived.js';
import { Schema } from '../../storage/schema.js';
import { createAutoEnrolledIdentity } from '../auth/ca-enrollment.js';
import { disableIdentity, enableIdentity, recordFailedLogin } from '../auth/lockout.js';
import { STATE_MACHINE_VERSION } from '../version.js';
import { apiSessions, expireSessions, touchSessions } from './api-session.js';
import { apiSessionCertificates, createSessionCertificate } from './api-session-certificate.js';
import { authPolicies, patchAuthPolicy } from './auth-policy.js';
import { authenticators } from './authenticator.js';
import { cas } from './ca.js';
import { clusterRemovals } from './cluster-removal.js';
import { clusterState, raiseStateMachineVersion } from './cluster-state.js';
import { configs } from './config.js';
import { configTypes } from './config-type.js';
import { controllerSettingsEntity } from './controller-setting.js';
import { edgeRouters, syncRouterTunneler } from './edge-router.js';
import { edgeRouterPolicies } from './edge-router-policy.js';
import { controllerKeys, enrollments } from './enrollment.js';
import { externalJwtSigners } from './external-jwt-signer.js';
import { identities } from './identity.js';
import { identityServiceConfigs } from './identity-service-config.js';
import { identityTraces } from './identity-trace.js';
import { identityTypes } from './identity-type.js';
import { countMfaFailure, mfas, useRecoveryCode, useTotp } from './mfa.js';
import { countPostureCheckChange, postureChecks } from './posture-check.js';
import { applyRevocation, revocations } from './revocation.js';
import { addRouterRows } from './router-rows.js';
import type { EntityRows } from './rows.js';
import { services } from './service.js';
import { serviceEdgeRouterPolicies } from './service-edge-router-policy.js';
import { servicePolicies } from './service-policy.js';
import { sessions } from './session.js';
import { terminators } from './terminator.js';
import { transitRouters } from './transit-router.js';

/** Every entity type Keel stores, in one list: the store schema and the CRUD operations both come from it. */
export const ENTITIES = [
  identityTypes,
  externalJwtSigners,
  authPolicies,
  identities,
  cas,
  authenticators,
  apiSessions,
  configTypes,
  configs,
  services,
  edgeRouters,
  postureChecks,
  servicePolicies,
  edgeRouterPolicies,
  serviceEdgeRouterPolicies,
  identityServiceConfigs,
  sessions,
  enrollments,
  controllerKeys,
  mfas,
  transitRouters,
  terminators,
  revocations,
  controllerSettingsEntity,
  identityTraces,
  apiSessionCertificates,
  clusterRemovals,
  clusterState,
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
  applyRevocation,
  addRouterRows,
  countMfaFailure,
  createSessionCertificate,
  patchAuthPolicy,
  syncRouterTunneler,
  createAutoEnrolledIdentity,
  countPostureCheckChange,
};

/**
 * The store's schema, for a member whose build applies state-machine versions up to `stateMachineVersion` (tests
 * pass another to play a member of another release).
 */
export function buildSchema(stateMachineVersion = STATE_MACHINE_VERSION): Schema<EntityRows> {
  return new Schema(
    ENTITIES.map((e) => e.def),
    { ...CUSTOM_COMMANDS, raiseStateMachineVersion: raiseStateMachineVersion(stateMachineVersion) },
    ENTITIES.flatMap((e): readonly DerivedIndexFactory[] => ('derived' in e ? (e.derived ?? []) : [])),
  );
}
