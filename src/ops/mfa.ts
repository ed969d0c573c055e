import { dataEnvelope } from '../../http/errors.js';
import type { HttpRequest, HttpResponse } from '../../http/types.js';
import { detailSchema } from '../api/entity.js';
import { ApiError, Errors } from '../api/errors.js';
import { type ApiName, type Caller, type OpDef, op } from '../api/op.js';
import { ok, okEmpty } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { createEnvelope, detailEnvelope, empty } from '../model/common.js';
import {
  detailMfa,
  isValidTotp,
  MAX_CODE_LENGTH,
  MAX_MFA_FAILURES,
  mfaOf,
  newRecoveryCodes,
  newTotpSecret,
  provisioningUrl,
  totpStep,
} from '../model/mfa.js';
import { guardAdminTarget } from '../model/preconditions.js';
import type { Command, Expect, RowFor } from '../model/rows.js';
import { s } from '../schema/s.js';
import { shortId, uuid } from '../util/ids.js';
import { qrPng } from '../util/qr.js';

const BOTH: ApiName[] = ['client', 'management'];
const TAGS = ['Current Identity', 'MFA'];
const SELF = './current-identity/mfa';

const mfaCode = s.named('mfaCode', s.obj({ code: s.str({ maxLength: MAX_CODE_LENGTH }) }, ['code']));
const detailMfaRecoveryCodes = detailSchema(
  'detailMfaRecoveryCodes',
  s.obj({ recoveryCodes: s.arr(s.str()) }, ['recoveryCodes']),
);
const totpToken = s.named('totpToken', s.obj({ issuedAt: s.datetime(), token: s.str() }, ['token', 'issuedAt']));

/** The code from the `mfa-validation-code` header or the body's `code`. */
function validationCode(req: HttpRequest, body: { code?: unknown } | undefined): string {
  const header = req.headers['mfa-validation-code'];
  const code = typeof header === 'string' && header !== '' ? header : body?.code;
  return typeof code === 'string' ? code.trim().slice(0, MAX_CODE_LENGTH + 1) : '';
}

function invalidToken(): ApiError {
  return Errors.MFA_INVALID_TOKEN();
}

/** The condition apply re-checks for a verification: the enrollment is still unverified (else 409 MFA_EXISTS). */
function unverified(mfaId: string): Expect {
  return {
    check: 'ne',
    entity: 'mfas',
    id: mfaId,
    field: 'isVerified',
    value: true,
    reason: 'the mfa enrollment is already verified',
    apiCode: 'MFA_EXISTS',
  };
}

/** The caller's MFA enrollment, or 404 (`verified`: only a completed one counts). */
function requireOwnMfa(svc: Services, caller: Caller, verified?: boolean): RowFor<'mfas'> {
  const mfa = mfaOf(svc, caller.identity.id);
  if (!mfa || (verified === true && mfa.isVerified !== true)) {
    throw Errors.NOT_FOUND({ code: 'UNHANDLED', message: 'mfa for the current identity not found' });
  }
  return mfa;
}

/** A verified enrollment for the login-time operations: 409 MFA_NOT_ENROLLED otherwise. */
function requireEnrolled(svc: Services, identityId: string): RowFor<'mfas'> {
  const mfa = mfaOf(svc, identityId);
  if (mfa?.isVerified !== true) throw Errors.MFA_NOT_ENROLLED();
  return mfa;
}

/**
 * Refuses a `code` that is not a current TOTP of `mfa` with refuseCode, for the caller's `session`, complete or not:
 * a right code here reveals the recovery codes, removes the second factor or proves MFA, which a session that
 * passed MFA (or a stolen token of it) must not get by guessing either.
 */
async function requireTotp(
  svc: Services,
  session: RowFor<'api-sessions'>,
  mfa: RowFor<'mfas'>,
  code: string,
): Promise<void> {
  if (!(await isValidTotp(svc, mfa.secret!, code))) await refuseCode(svc, session, true);
}

/**
 * Refuses a wrong code (400 MFA_INVALID_TOKEN, without saying whether it was wrong or spent). The wrong code counts
 * toward MAX_MFA_FAILURES (countMfaFailure, replicated) for a session that has not passed MFA, and for one that has
 * (`completeToo`) on the checks that spend nothing (recovery codes, removal, totp-token): otherwise those would let
 * a session guess without limit. A complete session's wrong code to `POST /authenticate/mfa` is not counted: there
 * it has nothing left to gain.
 */
async function refuseCode(svc: Services, session: RowFor<'api-sessions'>, completeToo: boolean): Promise<never> {
  if (completeToo || session.isMfaComplete !== true) {
    const args = { sessionId: session.id, max: MAX_MFA_FAILURES, completeToo };
    await svc.write({ op: 'custom', name: 'countMfaFailure', args, at: svc.nowIso() });
  }
  throw invalidToken();
}

/**
 * Removes an identity's MFA: the row and the identity's `isMfaEnabled`, together; `expect`: what the removal
 * relies on (the rights rule, re-checked in apply).
 */
function removeMfa(svc: Services, mfa: RowFor<'mfas'>, expect: Expect[] = []): Command {
  const at = svc.nowIso();
  return {
    op: 'batch',
    ...(expect.length > 0 ? { expect } : {}),
    ops: [
      { op: 'delete', entity: 'mfas', id: mfa.id, at, system: true },
      {
        op: 'update',
        entity: 'identities',
        id: mfa.identityId!,
        set: { isMfaEnabled: false },
        at,
        system: true,
      },
    ],
  };
}

function renderMfa(mfa: RowFor<'mfas'>, identity: RowFor<'identities'>): Record<string, unknown> {
  const out: Record<string, unknown> = {
    _links: { self: { href: SELF } },
    createdAt: mfa.createdAt,
    id: mfa.id,
    tags: {},
    updatedAt: mfa.updatedAt,
    isVerified: mfa.isVerified === true,
  };
  if (mfa.isVerified !== true) {
    out.provisioningUrl = provisioningUrl(mfa.secret!, identity.name!);
    out.recoveryCodes = mfa.recoveryCodes ?? [];
  }
  return out;
}

const emptyResponse = { 200: { description: 'Base empty response', schema: empty } };

export function mfaOps(): OpDef<unknown>[] {
  return [
    op({
      method: 'POST',
      path: '/current-identity/mfa',
      apis: BOTH,
      operationId: 'enrollMfa',
      tags: TAGS,
      summary: 'Initiate MFA enrollment',
      access: 'partial',
      responses: {
        201: {
          description: 'The create request was successful and the resource has been added at the following location',
          schema: createEnvelope,
        },
      },
      handler: async ({ caller, svc }) => {
        if (mfaOf(svc, caller!.identity.id)) throw Errors.MFA_EXISTS();
        const id = shortId();
        await svc.write({
          op: 'create',
          entity: 'mfas',
          id,
          at: svc.nowIso(),
          system: true,
          data: {
            identityId: caller!.identity.id,
            isVerified: false,
            secret: newTotpSecret(),
            recoveryCodes: newRecoveryCodes(),
          },
        });
        return dataEnvelope({ _links: { self: { href: SELF } }, id }, {}, 201);
      },
    }),
    op({
      method: 'GET',
      path: '/current-identity/mfa',
      apis: BOTH,
      operationId: 'detailMfa',
      tags: TAGS,
      summary: 'Returns the current status of MFA enrollment',
      access: 'partial',
      responses: {
        200: {
          description: 'The details of an MFA enrollment',
          schema: detailEnvelope('detailMfaEnvelope', detailMfa),
        },
      },
      handler: ({ caller, svc }) => ok(renderMfa(requireOwnMfa(svc, caller!), caller!.identity)),
    }),
    op({
      method: 'GET',
      path: '/current-identity/mfa/qr-code',
      apis: BOTH,
      operationId: 'detailMfaQrCode',
      tags: TAGS,
      summary: 'Show a QR code for unverified MFA enrollments',
      access: 'partial',
      responses: { 200: { description: 'OK' } },
      handler: ({ caller, svc }): HttpResponse => {
        const mfa = requireOwnMfa(svc, caller!);
        if (mfa.isVerified === true) {
          throw Errors.NOT_FOUND({ code: 'UNHANDLED', message: 'the mfa enrollment is already verified' });
        }
        const png = qrPng(provisioningUrl(mfa.secret!, caller!.identity.name!));
        return { status: 200, headers: { 'content-type': 'image/png', 'cache-control': 'no-store' }, body: png };
      },
    }),
    op({
      method: 'POST',
      path: '/current-identity/mfa/verify',
      apis: BOTH,
      operationId: 'verifyMfa',
      tags: TAGS,
      summary: 'Complete MFA enrollment by verifying a time based one time token',
      access: 'partial',
      body: mfaCode,
      bodyName: 'mfaValidation',
      responses: emptyResponse,
      handler: async ({ caller, body, svc }) => {
        const mfa = mfaOf(svc, caller!.identity.id);
        if (!mfa) throw Errors.MFA_ENROLLMENT_NOT_STARTED();
        if (mfa.isVerified === true) throw Errors.MFA_EXISTS();
        const timeStep = await totpStep(svc, mfa.secret!, body.code.trim());
        if (timeStep === null) throw invalidToken();
        const at = svc.nowIso();
        // the session that proved the code has passed MFA; the code is spent. Verified once: of two verifications
        // racing with one code, the one applied second finds the enrollment verified (409, as if it had been so)
        await svc.write({
          op: 'batch',
          expect: [unverified(mfa.id)],
          ops: [
            {
              op: 'update',
              entity: 'mfas',
              id: mfa.id,
              set: { isVerified: true, lastTimeStep: timeStep },
              at,
              system: true,
            },
            {
              op: 'update',
              entity: 'identities',
              id: caller!.identity.id,
              set: { isMfaEnabled: true },
              at,
              system: true,
            },
            {
              op: 'update',
              entity: 'api-sessions',
              id: caller!.session.id,
              set: { isMfaRequired: true, isMfaComplete: true, mfaCompletedAt: at },
              at,
              system: true,
            },
          ],
        });
        return okEmpty();
      },
    }),
    op({
      method: 'GET',
      path: '/current-identity/mfa/recovery-codes',
      apis: BOTH,
      operationId: 'detailMfaRecoveryCodes',
      tags: TAGS,
      summary: 'For a completed MFA enrollment view the current recovery codes',
      // OpenZiti: IsAuthenticated, as the regeneration and the removal below. A session still waiting for MFA must
      // complete it first (POST /authenticate/mfa, where a code is spent once): these checks spend nothing, so a
      // code already used for a login would otherwise still reveal the recovery codes or remove the second factor.
      access: 'authenticated',
      body: mfaCode,
      bodyName: 'mfaValidation',
      bodyRequired: false,
      responses: {
        200: {
          description: 'The recovery codes of an MFA enrollment',
          schema: detailEnvelope('detailMfaRecoveryCodesEnvelope', detailMfaRecoveryCodes),
        },
      },
      handler: async ({ caller, req, body, svc }) => {
        const mfa = requireOwnMfa(svc, caller!, true);
        await requireTotp(svc, caller!.session, mfa, validationCode(req, body));
        return ok({
          _links: { self: { href: `${SELF}/recovery-codes` } },
          createdAt: mfa.createdAt,
          id: mfa.id,
          tags: {},
          updatedAt: mfa.updatedAt,
          recoveryCodes: mfa.recoveryCodes ?? [],
        });
      },
    }),
    op({
      method: 'POST',
      path: '/current-identity/mfa/recovery-codes',
      apis: BOTH,
      operationId: 'createMfaRecoveryCodes',
      tags: TAGS,
      summary: 'For a completed MFA enrollment regenerate the recovery codes',
      access: 'authenticated',
      body: mfaCode,
      bodyName: 'mfaValidation',
      responses: emptyResponse,
      handler: async ({ caller, req, body, svc }) => {
        const mfa = requireOwnMfa(svc, caller!, true);
        await requireTotp(svc, caller!.session, mfa, validationCode(req, body));
        await svc.write({
          op: 'update',
          entity: 'mfas',
          id: mfa.id,
          set: { recoveryCodes: newRecoveryCodes() },
          at: svc.nowIso(),
          system: true,
        });
        return okEmpty();
      },
    }),
    op({
      method: 'DELETE',
      path: '/current-identity/mfa',
      apis: BOTH,
      operationId: 'deleteMfa',
      tags: TAGS,
      summary: 'Disable MFA for the current identity',
      description: 'A completed enrollment needs a valid code (TOTP or recovery code) in `mfa-validation-code`.',
      access: 'authenticated',
      body: s.obj({ code: s.str({ maxLength: MAX_CODE_LENGTH }) }),
      bodyRequired: false,
      responses: emptyResponse,
      handler: async ({ caller, req, body, svc }) => {
        const mfa = requireOwnMfa(svc, caller!);
        if (mfa.isVerified === true) {
          const code = validationCode(req, body as { code?: string } | undefined);
          const recovery = (mfa.recoveryCodes ?? []).includes(code.toUpperCase());
          if (!recovery) await requireTotp(svc, caller!.session, mfa, code);
        }
        await svc.write(removeMfa(svc, mfa));
        return okEmpty();
      },
    }),
    op({
      method: 'POST',
      path: '/authenticate/mfa',
      apis: BOTH,
      operationId: 'authenticateMfa',
      tags: ['Authentication', 'MFA'],
      summary: 'Complete MFA authentication',
      description: 'Completes MFA authentication by submitting a MFA time based one time token or backup code.',
      access: 'partial',
      body: mfaCode,
      bodyName: 'mfaAuth',
      responses: emptyResponse,
      handler: async ({ caller, body, svc }) => {
        const { session, identity } = caller!;
        const mfa = requireEnrolled(svc, identity.id);
        const code = body.code.trim();
        const at = svc.nowIso();
        const timeStep = await totpStep(svc, mfa.secret!, code);
        try {
          await svc.write(
            timeStep !== null
              ? { op: 'custom', name: 'useTotp', args: { mfaId: mfa.id, timeStep, sessionId: session.id }, at }
              : {
                  op: 'custom',
                  name: 'useRecoveryCode',
                  args: { mfaId: mfa.id, code: code.toUpperCase(), sessionId: session.id },
                  at,
                },
          );
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 'MFA_INVALID_TOKEN')) throw err;
          await refuseCode(svc, session, false);
        }
        return okEmpty();
      },
    }),
    op({
      method: 'POST',
      path: '/current-api-session/totp-token',
      apis: BOTH,
      operationId: 'createTotpToken',
      tags: ['Current API Session', 'MFA'],
      summary: 'Create an additional TOTP token that proves TOTP validation occurred at a specific time',
      access: 'authenticated',
      body: mfaCode,
      bodyName: 'mfaValidation',
      responses: {
        200: {
          description: 'A TOTP token create response, contains a token used to satisfy posture checks',
          schema: detailEnvelope('totpTokenEnvelope', totpToken),
        },
      },
      handler: async ({ caller, body, svc }) => {
        const mfa = requireEnrolled(svc, caller!.identity.id);
        await requireTotp(svc, caller!.session, mfa, body.code.trim());
        return ok({ issuedAt: svc.nowIso(), token: uuid() });
      },
    }),
    op({
      method: 'DELETE',
      path: '/identities/{id}/mfa',
      apis: ['management'],
      operationId: 'removeIdentityMfa',
      tags: ['Identity', 'MFA'],
      summary: 'Remove MFA from an identity',
      description: 'Allows an admin to remove MFA enrollment from a specific identity.',
      access: 'admin',
      permission: 'identity',
      // OpenZiti: identity.update (removing an identity's MFA changes the identity)
      permissionAction: 'update',
      responses: emptyResponse,
      handler: async ({ caller, params, svc }) => {
        const identity = svc.require('identities', params.id!);
        // a caller without admin rights may not act on an admin (checked here and again in apply)
        const expect = guardAdminTarget(caller, identity.isAdmin === true, identity.id);
        const mfa = mfaOf(svc, identity.id);
        if (!mfa) throw Errors.NOT_FOUND({ code: 'UNHANDLED', message: `identity ${identity.id} has no mfa` });
        await svc.write(removeMfa(svc, mfa, expect));
        return okEmpty();
      },
    }),
  ];
}
