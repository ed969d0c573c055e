#!/usr/bin/env node
// `npm run mutants [-- id ...] [--strict] [--no-baseline] [--verbose]`: breaks one safety rule at a time in a temporary copy
// of the repository and runs only the tests that should notice. Every mutant must be killed (its tests fail);
// a surviving mutant means a rule no test protects, and the run fails.
//
// Each mutant is an exact search/replace on one file. The search text must occur exactly once in that file, or
// the run fails before anything else: the list stays true as the code moves. See README.md, "Mutants".
import { spawn, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..');
/** A mutant whose tests run longer than this is counted as killed (it hangs the system under test). */
const TIMEOUT_MS = 5 * 60_000;

/**
 * The curated mutants. `tests`: vitest file filters (a folder takes every test file under it). `only`: the name
 * (a literal part of it) of the test that kills the mutant, where its file is slow: vitest runs the tests whose
 * full name contains it (`-t`), the file's setup as always. `pending`: the
 * test that kills it lands with another change; while pending, a survivor is reported but does not fail the run
 * (`--strict` makes it fail). Remove `pending` once the killing test is in.
 */
export const MUTANTS = [
  // storage and durability
  {
    id: 'store-batch-unsynced',
    file: 'storage/store.ts',
    search: 'await this.db.batch(ops, { sync: opts.sync });',
    replace: 'await this.db.batch(ops, { sync: false });',
    tests: ['test/storage/power-loss.test.ts'],
  },
  {
    id: 'store-unique-index',
    file: 'storage/apply.ts',
    search: 'const holders = this.txn.lookup(def.name, field, v);\n    if (heldByAnother(holders, row.id)) {',
    replace: 'const holders = this.txn.lookup(def.name, field, v);\n    if (heldByAnother(holders, row.id) && false) {',
    tests: ['test/storage/store.test.ts'],
  },
  {
    id: 'raft-snapshot-keeps-removed-peers',
    file: 'raft/node.ts',
    search: '      this.syncPeers();\n      if (this.stopped) return;',
    replace: '      this.addPeersOf(this.log.appliedConf().addresses);\n      if (this.stopped) return;',
    tests: ['raft/node/snapshot-peers.test.ts'],
  },
  {
    id: 'raft-snapshot-without-addresses',
    file: 'raft/node.ts',
    search: 'this.transport.send([this.withAddresses(m)]);',
    replace: 'this.transport.send([m]);',
    tests: ['raft/node/snapshot-peers.test.ts'],
  },
  {
    id: 'raft-log-unsynced',
    file: 'raft/storage/level-log.ts',
    search:
      '    await this.db.batch(ops, { sync: true });\n    this.stateDirty = false;\n\n    if (snapshot !== null) {',
    replace:
      '    await this.db.batch(ops, { sync: false });\n    this.stateDirty = false;\n\n    if (snapshot !== null) {',
    tests: ['raft/storage/level-log.power-loss.test.ts'],
  },
  {
    id: 'ext-jwt-login-unchecked-in-apply',
    file: 'src/ops/authentication.ts',
    search: "await svc.write({ op: 'batch', ops, ...(expect ? { expect } : {}) });",
    replace: "await svc.write({ op: 'batch', ops });",
    tests: ['test/api/ext-jwt.test.ts'],
    only: 'changes while it verifies',
  },
  {
    id: 'ca-claim-merge-unchecked',
    file: 'src/model/ca.ts',
    search: "      if (mode === 'patch' && existing) expect.push(rowUnchanged('cas', existing, 'externalIdClaim'));\n",
    replace: '',
    tests: ['test/api/cas.test.ts'],
    only: 'merges into the claim as it is where the write applies',
  },
  {
    id: 'merge-not-retried',
    file: 'src/api/entity.ts',
    search: 'if (!(merged && moved && isRecordedFailure(err) && attempt < MAX_MERGE_ATTEMPTS)) throw err;',
    replace: 'throw err;',
    tests: ['test/api/cas.test.ts'],
    only: 'merges into the claim as it is where the write applies',
  },
  // Raft protocol and driver
  {
    id: 'raft-held-kept-after-leadership',
    file: 'raft/node.ts',
    search: "    if (role !== 'leader') this.releaseHeld();\n",
    replace: '',
    tests: ['raft/node.test.ts'],
    only: 'refuses held proposals when the node stops leading',
  },
  {
    id: 'raft-held-kept-after-stop',
    file: 'raft/node.ts',
    search: '    this.stopped = true;\n    this.releaseHeld();\n',
    replace: '    this.stopped = true;\n',
    tests: ['raft/node.test.ts'],
    only: 'refuses held proposals when the node stops (none left waiting)',
  },
  {
    id: 'raft-hold-ignored',
    file: 'raft/node.ts',
    search: "      if (st.role === 'leader' && st.lastIndex > st.commit) {",
    replace: "      if (st.role === 'leader' && st.lastIndex > st.commit && false) {",
    tests: ['raft/node.test.ts'],
    only: 'appends the proposals made while its batch is uncommitted',
  },
  {
    id: 'raft-deferred-restart-behind',
    file: 'raft/node.ts',
    search: '      if (snap.deferred === true) {\n',
    replace: '      if (snap.deferred === true && false) {\n',
    tests: ['raft/node/snapshot-deferred.test.ts'],
  },
  {
    id: 'raft-deferred-not-requested',
    file: 'raft/core/raft.ts',
    search: '      this.snapshotRequested = true;',
    replace: '      this.snapshotRequested = false;',
    tests: ['raft/node/snapshot-deferred.test.ts'],
  },
  {
    id: 'raft-deferred-replaces-fresh-bytes',
    file: 'raft/node.ts',
    search: '        if (fresh || this.core.snapshotStreamActive()) return;',
    replace: '        if (false && fresh) return;',
    tests: ['raft/node/snapshot-deferred.test.ts'],
  },
  {
    id: 'raft-log-deferred-format',
    file: 'raft/storage/level-log.ts',
    search: '        if (this.formatVersion < FORMAT_VERSION_DEFERRED) {',
    replace: '        if (this.formatVersion < FORMAT_VERSION_DEFERRED && false) {',
    tests: ['raft/storage/level-log.test.ts'],
    only: 'records a deferred snapshot',
  },
  {
    id: 'raft-vote-log-check',
    file: 'raft/core/raft.ts',
    search: 'if (canVote && this.candidateLogUpToDate(m.index, m.logTerm)) {',
    replace: 'if (canVote) {',
    tests: ['raft/core/election.test.ts'],
  },
  {
    id: 'raft-send-before-persist',
    file: 'raft/node.ts',
    search:
      '    const { beforePersist, afterPersist } = splitMessages(rd, this.durableTerm);\n    this.send(beforePersist);',
    replace: '    this.send(rd.messages);\n    const afterPersist: Message[] = [];',
    tests: ['raft/node.test.ts'],
  },
  {
    id: 'checker-election-safety',
    file: 'raft/sim/checker.ts',
    search: "if (prior !== id) this.violation('election-safety',",
    replace: "if (prior !== id && false) this.violation('election-safety',",
    tests: ['raft/sim/broken.test.ts'],
  },
  {
    id: 'checker-log-matching',
    file: 'raft/sim/checker.ts',
    search: '} else if (seen.dataHash !== dataHash) {',
    replace: '} else if (false) {',
    tests: ['raft/sim/broken.test.ts'],
  },
  {
    id: 'checker-exactly-once',
    file: 'raft/sim/checker.ts',
    search: "else if (at !== index)\n      this.violation('exactly-once',",
    replace: "else if (false)\n      this.violation('exactly-once',",
    tests: ['raft/sim/broken.test.ts'],
  },
  // sessions
  {
    id: 'session-expiry',
    file: 'src/auth/sessions.ts',
    search: 'if (this.svc.clock.now() > this.expiresAtMs(session)) return null;',
    replace: '',
    tests: ['test/api/sessions.test.ts'],
    only: 'a session expires after the idle timeout; activity extends it',
  },
  {
    id: 'login-password-check',
    file: 'src/ops/authentication.ts',
    search: 'if (!(await verifyPassword(authenticator.password!, password, { source, admin }))) {',
    replace: 'if (false) {',
    tests: ['test/api/conformance.test.ts'],
    only: 'client: bad credentials and methods',
  },
  // access: the route guard
  {
    id: 'route-missing-token',
    file: 'src/api/register.ts',
    search: "if (!token) throw unauthorized('missing');",
    replace: '',
    tests: ['test/api/authz.test.ts'],
    only: 'client GET /current-api-session',
  },
  {
    id: 'route-invalid-token',
    file: 'src/api/register.ts',
    search: "    throw unauthorized('invalid');\n",
    replace: '',
    tests: ['test/api/authz.test.ts'],
    only: 'client GET /current-api-session',
  },
  {
    id: 'route-partial-session',
    file: 'src/api/register.ts',
    search: "if (partial && op.access !== 'partial') throw unauthorized('forbidden');",
    replace: '',
    tests: ['test/api/authz.test.ts'],
    only: 'client GET /current-identity',
  },
  {
    id: 'route-admin-access',
    file: 'src/api/register.ts',
    search: "if (op.access === 'admin' && !hasAdminAccess(caller.identity, op)) throw unauthorized('forbidden');",
    replace: '',
    tests: ['test/api/authz.test.ts'],
    only: 'management GET /cas',
  },
  {
    id: 'admin-access-isadmin',
    file: 'src/api/register.ts',
    search: 'if (identity.isAdmin === true) return true;',
    replace: '',
    tests: ['test/api/authz.test.ts'],
  },
  {
    id: 'admin-access-readonly-writes',
    file: 'src/api/register.ts',
    search: "if (action === 'read' && perms.includes('admin_readonly')) return true;",
    replace: "if (perms.includes('admin_readonly')) return true;",
    tests: ['test/api/authz.test.ts'],
    only: 'management POST /cas',
  },
  {
    id: 'admin-access-action',
    file: 'src/api/register.ts',
    search: 'return perms.includes(op.permission) || perms.includes(',
    replace: 'return perms.some((p) => p.startsWith(op.permission!)) || perms.includes(',
    tests: ['test/api/authz.test.ts'],
    only: 'management POST /identities, plain',
  },
  {
    id: 'admin-access-permission',
    file: 'src/api/register.ts',
    search: 'return perms.includes(op.permission) || perms.includes(',
    replace: 'return perms.length > 0 || perms.includes(',
    tests: ['test/api/authz.test.ts'],
    only: 'management GET /cas',
  },
  // access: identity and authenticator write guards
  {
    id: 'guard-admin-target',
    file: 'src/model/preconditions.ts',
    search:
      "  if (!caller || caller.identity.isAdmin === true) return [];\n  if (targetIsAdmin) throw unauthorized('forbidden');\n  return [targetNotAdmin(targetId)];",
    replace: '  return [];',
    tests: ['test/api/authz.test.ts'],
    only: "a non-admin may not change or delete an admin's authenticator",
  },
  {
    id: 'apply-precondition-ne',
    file: 'storage/apply.ts',
    search: ': row?.[e.field] !== e.value;',
    replace: ': true;',
    tests: ['test/api/preconditions.test.ts', 'test/storage/'],
    only: 'a non-admin may not update or delete an identity that became an admin after the check',
  },
  {
    id: 'identity-make-admin',
    file: 'src/model/identity.ts',
    search: 'body.isAdmin === true ||',
    replace: 'false ||',
    tests: ['test/api/authz.test.ts'],
    only: 'management POST /identities, admin',
  },
  {
    id: 'identity-grant-permissions',
    file: 'src/model/identity.ts',
    search: '? body.isAdmin === true || (Array.isArray(body.permissions) && body.permissions.length > 0)',
    replace: '? body.isAdmin === true || false',
    tests: ['test/api/authz.test.ts'],
    only: 'management POST /identities, with permissions',
  },
  {
    id: 'identity-delete-admin',
    file: 'src/model/identity.ts',
    search: 'const expect = guardAdminTarget(caller, row.isAdmin === true, row.id);',
    replace: 'const expect: Expect[] = [];',
    tests: ['test/api/authz.test.ts'],
    only: 'management DELETE /identities/{id}, target admin',
  },
  {
    id: 'identity-delete-default-admin',
    file: 'src/model/identity.ts',
    search: '    if (row.isDefaultAdmin) {\n      throw Errors.ENTITY_CAN_NOT_BE_DELETED(',
    replace: '    if (row.isDefaultAdmin && false) {\n      throw Errors.ENTITY_CAN_NOT_BE_DELETED(',
    tests: ['test/api/authz.test.ts'],
    only: 'management DELETE /identities/{id}, target default',
  },
  {
    id: 'identity-demote-default-admin',
    file: 'src/model/identity.ts',
    search: 'if (existing?.isDefaultAdmin && out.isAdmin === false) {',
    replace: 'if (false) {',
    tests: ['test/api/authz.test.ts'],
    only: 'management PUT /identities/{id}, target default, demote',
  },
  {
    id: 'authenticator-write-admin-target',
    file: 'src/model/authenticator.ts',
    search: "expect.push(...guardAdminTarget(caller, svc.get('identities', targetId)?.isAdmin === true, targetId));",
    replace: '',
    tests: ['test/api/authz.test.ts'],
    only: "a non-admin may not change or delete an admin's authenticator",
  },
  {
    id: 'authenticator-delete-admin-target',
    file: 'src/model/authenticator.ts',
    search: "return guardAdminTarget(caller, svc.get('identities', targetId)?.isAdmin === true, targetId);",
    replace: 'return [];',
    tests: ['test/api/authz.test.ts'],
    only: "a non-admin may not change or delete an admin's authenticator",
  },
  {
    id: 'redact-for-non-admins',
    file: 'src/api/entity.ts',
    search: 'if (!spec.redact || caller?.identity.isAdmin === true) return entity.renderJson(row, svc);',
    replace: 'return entity.renderJson(row, svc);',
    tests: ['test/api/authz.test.ts'],
    only: 'session tokens and enrollment secrets are for admins only',
  },
  // access model: the policy engine's role semantics (REFERENCE §5), incremental and from scratch
  {
    id: 'roles-allof-as-anyof',
    file: 'storage/role-index.ts',
    search: 'return p.anyOf ? p.attrs.some((a) => attrs.has(a)) : p.attrs.every((a) => attrs.has(a));',
    replace: 'return p.attrs.some((a) => attrs.has(a));',
    tests: ['test/storage/role-index.test.ts', 'test/api/policies.test.ts'],
  },
  {
    id: 'roles-index-allof-as-anyof',
    file: 'storage/role-index.ts',
    search: '    if (p.anyOf) {\n      for (const set of sets) for (const id of set) out.add(id);',
    replace: '    if (true) {\n      for (const set of sets) for (const id of set) out.add(id);',
    tests: ['test/storage/role-index.test.ts', 'test/api/policies.test.ts'],
  },
  // identity security: lockout, single-use TOTP, disabled identities' sessions
  {
    id: 'lockout-never',
    file: 'src/auth/lockout.ts',
    search: '  if (attempts < rule.maxAttempts) {',
    replace: '  if (true) {',
    tests: ['test/api/lockout.test.ts'],
  },
  {
    id: 'totp-reuse',
    file: 'src/model/mfa.ts',
    search: 'if (mfa?.isVerified !== true || (mfa.lastTimeStep ?? -1) >= args.timeStep) {',
    replace: 'if (mfa?.isVerified !== true) {',
    tests: ['test/api/mfa.test.ts'],
  },
  {
    id: 'disabled-identity-session',
    file: 'src/api/register.ts',
    search:
      "if (caller.identity.disabledAt && isDisabled(caller.identity, svc.clock.now())) throw unauthorized('invalid');",
    replace: '',
    tests: ['test/api/lockout.test.ts'],
  },
  // self-service authenticators: only the caller's own, only with the current password; revocations end sessions
  {
    id: 'self-authenticator-not-own',
    file: 'src/model/authenticator.ts',
    search: '  if (!row || row.identityId !== identityId)',
    replace: '  if (!row)',
    tests: ['test/api/self-authenticators.test.ts'],
  },
  {
    id: 'self-authenticator-current-password',
    file: 'src/ops/self-authenticators.ts',
    search: 'if (!(await verifyPassword(hash, change.currentPassword, who))) {',
    replace: 'if (!(await verifyPassword(hash, change.currentPassword, who)) && false) {',
    tests: ['test/api/self-authenticators.test.ts'],
  },
  {
    id: 'revocation-identity-sessions',
    file: 'src/model/revocation.ts',
    search: "  if (args.type === 'IDENTITY') return endSessions(ctx, args.id, at);",
    replace: '',
    tests: ['test/api/operations.test.ts'],
  },
  {
    id: 'revocation-api-session',
    file: 'src/model/revocation.ts',
    search: "    ctx.delete('api-sessions', args.id, at, true);",
    replace: '',
    tests: ['test/api/operations.test.ts'],
  },
  // cluster: replaying the log applies each entry once (entries at or below the store's applied index are skipped)
  {
    id: 'cluster-replay-twice',
    file: 'src/cluster/state-machine.ts',
    search: '      if (e.index <= this.store.appliedIndex) continue;',
    replace: '',
    tests: ['test/cluster/state-machine.test.ts'],
  },
  // the client lists the terminators of a service only when it may use the service
  {
    id: 'client-terminators-any-service',
    file: 'src/model/service.ts',
    search: 'if (serviceAccessOf(ctx.svc, ctx.caller!.identity.id, service.id).size === 0) {',
    replace: 'if (false) {',
    tests: ['test/api/access.test.ts'],
    only: 'GET /services/{id}/terminators: all of them',
  },
  // PKI and the API listener
  {
    id: 'insecure-http-anywhere',
    file: 'src/cli/main.ts',
    search: 'if (insecure && !isLoopbackHost(listenHost)) {',
    replace: 'if (insecure && listenHost === "") {',
    tests: ['test/cli/flags.test.ts'],
  },
  {
    id: 'join-bundle-without-signing-ca',
    file: 'src/pki/cluster.ts',
    search: 'const withSigningCa = opts.withSigningCa ?? true;',
    replace: 'const withSigningCa = opts.withSigningCa ?? false;',
    tests: ['test/pki/cluster.test.ts'],
  },
  {
    id: 'api-cert-never-reissued',
    file: 'src/pki/node-pki.ts',
    search: 'return hosts.some((h) => !coversHost(names, normalHost(h)));',
    replace: 'return false;',
    tests: ['test/pki/cluster.test.ts'],
    only: 'issues the API certificate anew for a host it lacks (IPv6 written any way), or when it expires soon',
  },
  // router enrollment: the client certificate names the router by its id; an extension needs a chain valid now
  {
    id: 'router-cn-unchecked',
    file: 'src/auth/router-enrollment.ts',
    search: 'if (isEdge && client.cn !== routerId) {',
    replace: 'if (false) {',
    tests: ['test/api/router-enroll.test.ts'],
  },
  {
    id: 'router-extend-chain-unchecked',
    file: 'src/auth/router-enrollment.ts',
    search: 'return verified.ok ? router : null;',
    replace: 'return router;',
    tests: ['test/api/router-enroll.test.ts'],
    only: 'an expired router certificate does not extend',
  },
  // a transit router's client certificate is named by its id whatever its CSR says; routers share one state row
  {
    id: 'router-trott-cn-from-csr',
    file: 'src/auth/router-enrollment.ts',
    search: '...(isEdge ? {} : { commonName: routerId }),',
    replace: '',
    tests: ['test/api/router-enroll.test.ts'],
  },
  {
    id: 'router-reenroll-no-router-row',
    file: 'src/auth/router-enrollment.ts',
    search: ': routerRowOf(edge.id, edge, at),',
    replace: ": { op: 'update', entity: 'transit-routers', id: edge.id, set: unverified, at },",
    tests: ['test/api/router-enroll.test.ts'],
  },
  // ephemeral certificates: another API session's do not exist for the caller; one logs in only while valid
  {
    id: 'session-cert-foreign',
    file: 'src/ops/session-certificates.ts',
    search: 'if (!row || row.apiSessionId !== ctx.caller!.session.id)',
    replace: 'if (!row)',
    tests: ['test/api/session-certificates.test.ts'],
  },
  {
    id: 'session-cert-expiry-unchecked',
    file: 'src/auth/cert-login.ts',
    search: '  if (!verified.ok) return null;\n  svc.sessions.touch(live.session);',
    replace: '  svc.sessions.touch(live.session);',
    tests: ['test/api/session-certificates.test.ts'],
  },
  // external ids: only a verified, auth-enabled CA's certificates log in by the id they carry
  {
    id: 'external-id-login-any-ca',
    file: 'src/auth/cert-login.ts',
    search: 'if (ca.isVerified !== true || ca.isAuthEnabled !== true || !isConfigured(claim)) continue;',
    replace: 'if (!isConfigured(claim)) continue;',
    tests: ['test/api/external-id.test.ts'],
    only: 'enrolls with the claimed external id (no authenticator); any certificate of the CA with that id logs in',
  },
  {
    id: 'external-id-login-chain-unchecked',
    file: 'src/auth/cert-login.ts',
    search: "if (!verified.ok && verified.code !== 'EXPIRED') continue;",
    replace: '',
    tests: ['test/api/external-id.test.ts'],
    only: 'enrolls with the claimed external id (no authenticator); any certificate of the CA with that id logs in',
  },
  // token enrollment: only what the signer allows (with a CSR / without), where the write applies (the handler's
  // own check is its early answer; broken alone, the apply-time condition still refuses)
  {
    id: 'token-enroll-unrestricted',
    file: 'src/auth/token-enrollment.ts',
    search: "[flag, 'enrollAuthPolicyId']",
    replace: "['enrollAuthPolicyId']",
    tests: ['test/api/token-enroll.test.ts'],
  },
  // cluster: the write-behind store's flush is synced, and the store is flushed before Raft takes a snapshot
  {
    id: 'store-write-behind-unsynced',
    file: 'storage/store.ts',
    search: '    this.staged = new Map();\n    try {\n      await this.db.batch(ops, { sync: true });',
    replace: '    this.staged = new Map();\n    try {\n      await this.db.batch(ops, { sync: false });',
    tests: ['test/cluster/write-behind.test.ts'],
  },
  {
    id: 'cluster-snapshot-unflushed',
    file: 'src/cluster/state-machine.ts',
    search:
      '    // the log is compacted up to the snapshot: the store on disk must not be behind it\n    await store.flush();',
    replace: '',
    tests: ['test/cluster/write-behind.test.ts'],
  },
  // cluster: a background snapshot is labelled with the index its rows were captured at, not a later one
  {
    id: 'cluster-snapshot-index-after-capture',
    file: 'src/cluster/state-machine.ts',
    search: '    return { index: view.index, chunks: chunks() };',
    replace: '    return { index: store.appliedIndex, chunks: chunks() };',
    tests: ['test/cluster/state-machine.test.ts'],
  },
  // auth rate limiter: an admin's credential check has a lane of its own; cert and ext-jwt logins are gated too
  {
    id: 'auth-no-admin-lane',
    file: 'src/auth/rate-limit.ts',
    search: '  return who.admin === true && isAdminSource(who.source) ? adminGate : loginGate;',
    replace: '  return loginGate;',
    tests: ['test/api/rate-limit.test.ts', 'test/api/ext-jwt.test.ts'],
    only: 'under a flood of bad logins the excess gets 429 and the admin gets in promptly',
  },
  {
    id: 'auth-cert-login-ungated',
    file: 'src/ops/authentication.ts',
    search:
      "        const byCert = method === 'cert' ? await gated(certLane(), () => certificateLogin(svc, chain)) : null;",
    replace: "        const byCert = method === 'cert' ? await certificateLogin(svc, chain) : null;",
    tests: ['test/api/enroll.test.ts'],
    only: 'goes through the auth rate limiter',
  },
  {
    id: 'auth-ext-jwt-login-ungated',
    file: 'src/ops/authentication.ts',
    search: '            ? await gated(jwtLane(), () => extJwtLogin(svc, req.headers))',
    replace: '            ? await extJwtLogin(svc, req.headers)',
    tests: ['test/api/ext-jwt.test.ts'],
  },
  // the production store database hands `sync` to LevelDB (the power-loss tests inject another StoreDb)
  {
    id: 'store-db-unsynced',
    file: 'raft/storage/log-db.ts',
    search: '  await batch.write({ sync: opts.sync });',
    replace: '  await batch.write({ sync: false });',
    tests: ['test/storage/store-db.test.ts'],
  },
  // a publish moves the stamp of every collection it changes (the rendering cache's invalidation)
  {
    id: 'store-collection-stamp',
    file: 'storage/store.ts',
    search: '      if (writes.size > 0) this.collectionEpochs.set(',
    replace: '      if (writes.size < 0) this.collectionEpochs.set(',
    tests: ['test/api/render-cache.test.ts'],
  },
  // a forward addressed to the leader of one term is never appended by the same node leading in a later term
  {
    id: 'forward-term-fence',
    file: 'raft/node.ts',
    search: 'if (term === undefined) return null;',
    replace: 'if (term !== -1) return null;',
    tests: ['raft/node.test.ts'],
  },
  // a partial session's wrong MFA codes are counted in replicated state, and the limit ends the session
  {
    id: 'mfa-failures-uncounted',
    file: 'src/model/mfa.ts',
    search: "  ctx.update('api-sessions', session.id, { mfaFailures: failures }, at, true);",
    replace: '',
    tests: ['test/api/mfa.test.ts'],
  },
  // every stored row is read back and compared before it is stored: the comparison without decoding vouches only
  // for bytes that decode to the row, and what it does not vouch for is decoded and compared
  {
    id: 'codec-compare-lenient',
    file: 'storage/encodes-as.ts',
    search: '      if (p >= end || src[p++] !== c) return false;',
    replace: '      if (p++ >= end) return false;',
    tests: ['test/storage/encodes-as.test.ts'],
  },
  {
    id: 'codec-decode-check-skipped',
    file: 'storage/codec.ts',
    search: '  if (!encodesAs(bytes, value)) checkDecoded(value, bytes);',
    replace: '  encodesAs(bytes, value);',
    tests: ['test/storage/faithful.test.ts'],
  },
  {
    id: 'store-row-check-skipped',
    file: 'storage/store.ts',
    search: 'this.values[this.length] = row === null ? null : encodeChecked(row);',
    replace: 'this.values[this.length] = row === null ? null : packr.pack(row);',
    tests: ['test/storage/faithful.test.ts'],
  },
  // a failed command is undone in the group's overlay: nothing of it is written or seen by the next commands
  {
    id: 'store-failed-command-kept',
    file: 'storage/store.ts',
    search: '        group.rollback(); // nothing of the command is written',
    replace: '        group.commit();',
    tests: ['test/storage/store.test.ts'],
  },
  // what a group publishes is what it writes: a row in its overlay that was never encoded fails the store
  {
    id: 'store-unencoded-row-published',
    file: 'storage/store.ts',
    search: '    const matched = heldBefore === 0 ? added === rows : added <= rows && rows <= writes.size;',
    replace: '    const matched = true;',
    tests: ['test/storage/store.test.ts'],
  },
  // a collection's rows in id order are the rows of its map: a replacement replaces the ordered row too
  {
    id: 'ordered-rows-replacement-kept-old',
    file: 'storage/sorted-rows.ts',
    search: '    if (ids[pos] === id) {\n      rows[pos] = row;\n      return false;',
    replace: '    if (ids[pos] === id) {\n      return false;',
    tests: ['test/storage/store.test.ts'],
  },
  // staggered snapshots: by rank, and never re-planned at or below the applied index after a membership change
  {
    id: 'snapshot-unstaggered',
    file: 'raft/node/snapshot-plan.ts',
    search: '  if (!p.stagger) return p.last + p.every;',
    replace: '  return p.last + p.every;',
    tests: ['raft/node/snapshot-plan.test.ts'],
  },
  {
    id: 'snapshot-replanned-at-once',
    file: 'raft/node/snapshot-plan.ts',
    search: '  if (at <= p.applied) at = after(p.applied);',
    replace: '',
    tests: ['raft/node/snapshot-plan.test.ts'],
  },
  // a login on a cluster member first catches up with what is committed, and reads the session it names again
  {
    id: 'login-without-catch-up',
    file: 'src/ops/authentication.ts',
    search: '      catchUpFirst: true,',
    replace: '',
    tests: ['test/cluster/credentials-across-members.test.ts'],
  },
  {
    // an enrollment token made through another member a moment ago is refused by a member that has not applied it
    id: 'enroll-without-catch-up',
    file: 'src/ops/enroll.ts',
    search: '      catchUpFirst: true,\n      body: updbCredentials,',
    replace: '      body: updbCredentials,',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'an enrollment on a member',
  },
  {
    id: 'catch-up-first-ignored',
    file: 'src/api/register.ts',
    search: 'if (op.catchUpFirst === true && svc.cluster !== null) return afterCatchUp(req);',
    replace: 'if (false) return afterCatchUp(req);',
    tests: ['test/cluster/credentials-across-members.test.ts'],
  },
  // the catch-up wait is bounded in time and in number
  {
    id: 'catch-up-unbounded',
    file: 'src/auth/sessions.ts',
    search:
      "      await withTimeout(cluster.readBarrier(), this.opts.catchUpTimeout_ms ?? CATCH_UP_TIMEOUT_MS, 'catch-up');",
    replace: '      await cluster.readBarrier();',
    tests: ['src/auth/catch-up.test.ts'],
  },
  {
    id: 'catch-up-uncapped',
    file: 'src/auth/sessions.ts',
    search: '    if (!cluster || this.catchingUp >= (this.opts.maxCatchUps ?? MAX_CATCH_UPS)) return;',
    replace: '    if (!cluster) return;',
    tests: ['src/auth/catch-up.test.ts'],
  },
  {
    id: 'uws-any-transfer-encoding',
    file: 'http/engines/body.ts',
    search:
      "if (te.trim().toLowerCase() !== 'chunked' || headers['content-length'] !== undefined) return { kind: 'invalid' };",
    replace: "if (false) return { kind: 'invalid' };",
    tests: ['http/engines/edge.test.ts'],
  },
  {
    id: 'uws-refusal-in-callback',
    file: 'http/engines/uws.ts',
    search: 'setImmediate(() => writeLater(res, ex, out, false, true));',
    replace: 'writeLater(res, ex, out, false, true);',
    tests: ['http/engines/edge.test.ts'],
  },
  {
    id: 'field-inherited-name',
    file: 'storage/apply.ts',
    search: '!Object.hasOwn(def.fields, k)',
    replace: '!(k in def.fields)',
    tests: ['test/storage/store.test.ts'],
  },
  {
    id: 'offer-unknown-refusal-accepted',
    file: 'src/cluster/raft-proposer.ts',
    search: 'assert(false, `RaftNode.offer refused with $' + '{err.code}`);',
    replace: 'return ACCEPTED;',
    tests: ['test/cluster/proposer.test.ts'],
  },
  {
    id: 'extend-without-certificate',
    file: 'src/ops/extend.ts',
    search: 'requirePresented(row, req.peerCertificates);',
    replace: '',
    tests: ['test/api/enroll.test.ts'],
    only: 'extend: requested by an admin (login header)',
  },
  {
    id: 'rights-patch-by-non-admin',
    file: 'src/model/identity.ts',
    search: ': RIGHTS_FIELDS.some((field) => Object.hasOwn(body, field));',
    replace: ': body.isAdmin === true || (Array.isArray(body.permissions) && body.permissions.length > 0);',
    tests: ['test/api/errors.test.ts'],
    only: "identity permissions do not let a non-admin change another identity's rights, revoking included (as OpenZiti)",
  },
  {
    id: 'mfa-recovery-codes-partial-session',
    file: 'src/ops/mfa.ts',
    search: "remove the second factor.\n      access: 'authenticated',",
    replace: "remove the second factor.\n      access: 'partial',",
    tests: ['test/api/mfa.test.ts'],
  },
  {
    id: 'mfa-complete-session-guesses-uncounted',
    file: 'src/ops/mfa.ts',
    search: 'await refuseCode(svc, session, true);',
    replace: 'await refuseCode(svc, session, false);',
    tests: ['test/api/mfa.test.ts'],
  },
  {
    id: 'session-certificates-uncapped-in-apply',
    file: 'src/model/api-session-certificate.ts',
    search: 'if (held >= args.max) {',
    replace: 'if (held >= args.max && false) {',
    tests: ['test/api/session-certificates.test.ts'],
    only: 'the bound holds for concurrent requests of one API session',
  },
  {
    id: 'password-change-guesses-uncounted',
    file: 'src/ops/self-authenticators.ts',
    search: 'await onFailedPassword(svc, identity);',
    replace: 'void identity;',
    tests: ['test/api/lockout.test.ts'],
  },
  {
    id: 'session-token-of-another-api-session',
    file: 'src/ops/access.ts',
    search: 'if (session?.apiSessionId !== ctx.caller!.session.id) throw',
    replace: 'if (session === undefined) throw',
    tests: ['test/api/browzer-edge-client.test.ts'],
  },
  {
    id: 'mfa-verify-twice',
    file: 'src/ops/mfa.ts',
    search: 'expect: [unverified(mfa.id)],',
    replace: '',
    tests: ['test/api/mfa.test.ts'],
  },
  {
    id: 'auth-policy-patch-stale-merge',
    file: 'src/model/auth-policy.ts',
    search: '      checkPolicy(svc, p, sec);\n      return out;',
    replace: '      checkPolicy(svc, p, sec);\n      return Object.assign(out, nestedFields(p, sec));',
    tests: ['test/api/auth-policies.test.ts'],
  },
  {
    id: 'signer-enroll-policy-unreferenced',
    file: 'src/model/external-jwt-signer.ts',
    search: "    ref: { entity: 'auth-policies', onDelete: 'restrict' },\n",
    replace: '',
    tests: ['test/api/token-enroll.test.ts'],
  },
  {
    id: 'peer-listener-unknown-path-unanswered',
    file: 'src/cluster/node.ts',
    search: 'rejectUpgrade(socket, 404);\n        return;',
    replace: 'return;',
    tests: ['test/cluster/peer-listener.test.ts'],
    only: 'other paths answer 404 and close',
  },
  // storage: a scalar index's ids in order (appended only past the last id); a get past the newest id finds nothing
  {
    id: 'sorted-ids-append-unchecked',
    file: 'storage/sorted-ids.ts',
    search: 'if (tail === undefined || tail[tail.length - 1]! < id) {',
    replace: 'if (tail === undefined || true) {',
    tests: ['storage/sorted-ids.test.ts'],
  },
  {
    id: 'collection-get-misses-newest',
    file: 'storage/collection.ts',
    search: 'if (last === undefined || id > last) return undefined;',
    replace: 'if (last === undefined || id >= last) return undefined;',
    tests: ['storage/sorted-ids.test.ts'],
  },
  // cluster: a join asked again (its outcome unknown) finishes what the first request started, never redoes it
  {
    id: 'add-member-not-idempotent',
    file: 'src/cluster/node.ts',
    search: '          if (there) return;\n',
    replace: '',
    tests: ['test/cluster/add-member.test.ts'],
  },
  {
    id: 'leader-refusal-not-raft-error',
    file: 'src/cluster/node.ts',
    search: 'if (code === null || err instanceof RaftError) throw err;',
    replace: 'throw err;',
    tests: ['test/cluster/add-member.test.ts'],
  },
  {
    id: 'join-not-retried',
    file: 'src/cluster/join.ts',
    search: 'if (code === null || !JOIN_RETRY_CODES.has(code) ||',
    replace: 'if (true ||',
    tests: ['test/cluster/join.test.ts'],
  },
  {
    // a follower leaving unanswered every append that repeats its last acknowledgement, not only commit notices:
    // a leader that lost that acknowledgement would never learn the follower's index again
    id: 'raft-repeat-ack-skipped-always',
    file: 'raft/core/raft.ts',
    search: 'if (repeat && m.entries.length === 0 && this.log.committed > committedBefore) return;',
    replace: 'if (repeat && m.entries.length === 0) return;',
    tests: ['raft/core/replication.test.ts'],
  },
  {
    // the leader holding a forward's refusal like an acceptance: the follower would try the next leader, or answer
    // 429, only after the hold
    id: 'forward-refusal-held',
    file: 'src/cluster/forward-channel.ts',
    search: 'if (!holdable || this.hold_ms <= 0 ||',
    replace: 'if (this.hold_ms <= 0 ||',
    tests: ['test/cluster/forward-channel.test.ts'],
  },
  {
    id: 'mtls-per-address-unbounded',
    file: 'src/util/mtls-server.ts',
    search: 'pending.has(key) || (perAddress.get(address) ?? 0) >= max) {',
    replace: 'pending.has(key)) {',
    tests: ['test/cluster/peer-listener.test.ts'],
    only: 'an unfinished handshake is dropped after the timeout',
  },
  {
    id: 'mtls-handshake-untimed',
    file: 'src/util/mtls-server.ts',
    search: '    handshakeTimeout: limits.handshakeTimeout_ms,\n',
    replace: '',
    tests: ['test/cluster/peer-listener.test.ts'],
    only: 'an unfinished handshake is dropped after the timeout',
  },
  {
    id: 'signer-patch-rewrites-key-material',
    file: 'src/model/external-jwt-signer.ts',
    search:
      "    if (mode === 'patch' && !Object.hasOwn(out, 'certPem') && !Object.hasOwn(out, 'jwksEndpoint')) return out;\n",
    replace: '',
    tests: ['test/api/ext-jwt.test.ts'],
  },
  {
    id: 'enrollment-token-unchecked-in-apply',
    file: 'src/auth/enrollment.ts',
    search: 'expect: [tokenHeld, ...expect]',
    replace: 'expect: [...expect]',
    tests: ['test/api/enroll.test.ts'],
  },
  {
    id: 'extend-certificate-unchecked-in-apply',
    file: 'src/ops/extend.ts',
    search:
      "await svc.write({ op: 'update', entity: 'authenticators', id: row.id, set, at: svc.nowIso(), expect });\n        return ok(",
    replace:
      "await svc.write({ op: 'update', entity: 'authenticators', id: row.id, set, at: svc.nowIso() });\n        return ok(",
    tests: ['test/api/enroll.test.ts'],
    only: 'extend with a certificate replaced while the request was checked',
  },
  {
    id: 'role-filter-unbounded',
    file: 'src/api/list.ts',
    search: 'if (roles.length > MAX_ROLE_FILTERS) {',
    replace: 'if (roles.length > MAX_ROLE_FILTERS && false) {',
    tests: ['test/api/hardening.test.ts'],
    only: 'roleFilter: at most 100 entries (400 beyond, repeats included), repeated ones evaluated once',
  },
  {
    id: 'mfa-removal-admin-unchecked-in-apply',
    file: 'src/ops/mfa.ts',
    search: 'await svc.write(removeMfa(svc, mfa, expect));',
    replace: 'await svc.write(removeMfa(svc, mfa));',
    tests: ['test/api/preconditions.test.ts'],
    only: 'a non-admin may not remove the MFA of an identity that became an admin after the check',
  },
  // a certificate is EXPIRED (which allowExpiredCerts accepts) only when a trusted CA signed it
  {
    id: 'chain-expired-before-signature',
    file: 'src/pki/verify.ts',
    search: "        leafOutOfTime = fail('EXPIRED',",
    replace: "        return fail('EXPIRED',",
    tests: ['test/pki/verify.test.ts'],
  },
  // a request-schema error about a credential field never echoes the credential
  {
    id: 'validation-echoes-secret',
    file: 'src/schema/validate.ts',
    search: '  if (isSecretField(field)) return REDACTED;\n',
    replace: '',
    tests: ['test/api/errors.test.ts'],
    only: 'a validation error about a credential names the field, never its value (OpenZiti echoes it)',
  },
  {
    id: 'validation-echoes-body',
    file: 'src/schema/validate.ts',
    search: "  if (field === '' || (actual !== null && typeof actual === 'object')) return undefined;\n",
    replace: '',
    tests: ['test/api/errors.test.ts'],
    only: 'is named but never echoed',
  },
  // PEM scanning is linear in the text (a quadratic regex stalled the event loop on a body of BEGIN lines)
  {
    id: 'pem-scan-quadratic',
    file: 'src/pki/pem.ts',
    search: '  const out: string[] = [];\n',
    replace:
      "  return text.match(new RegExp(begin + '[\\\\s\\\\S]+?' + end, 'g')) ?? [];\n  const out: string[] = [];\n",
    tests: ['test/pki/verify.test.ts'],
    only: 'is linear: a megabyte of BEGIN lines without an END is refused at once (a regex took tens of seconds)',
  },
  // a body that is not JSON is refused without quoting it (V8's parse message quotes the text around the fault)
  {
    id: 'parse-error-quotes-body',
    file: 'http/json-body.ts',
    search: 'message: JSON_PARSE_FAILED });',
    replace:
      "message: (() => { try { JSON.parse(body.toString('utf8')); } catch (e) { return (e as Error).message; } return ''; })() });",
    tests: ['http/json-body.test.ts'],
  },
  // the enrollment challenge signs UUIDs only: the same key signs enrollment and network JWTs
  {
    id: 'challenge-signs-any-nonce',
    file: 'src/ops/token-enroll.ts',
    search: 'if (!UUID.test(nonce)) throw',
    replace: 'if (!UUID.test(nonce) && false) throw',
    tests: ['test/api/token-enroll.test.ts'],
  },
  // token enrollment records the id claim ext-jwt login reads (a property name, never a JSON pointer)
  {
    id: 'token-enroll-id-claim-as-pointer',
    file: 'src/auth/token-enrollment.ts',
    search: 'const id = idClaimOf(signer, payload);',
    replace: "const id = claimString(payload, signer.claimsProperty || '/sub');",
    tests: ['test/api/token-enroll.test.ts'],
  },
  {
    // a persist acknowledged before its write-ahead record is durable (like a batch written without sync)
    id: 'raft-wal-record-unawaited',
    file: 'raft/storage/level-log.ts',
    search: '    await file.write(parts, this.wal_bytes, inline);',
    replace: '    file.write(parts, this.wal_bytes, inline).catch(() => undefined);',
    tests: ['raft/storage/level-log.power-loss.test.ts'],
    only: 'with a write-ahead file',
  },
  {
    // write-ahead records not replayed on open: entries acknowledged through the file would be lost
    id: 'raft-wal-not-replayed',
    file: 'raft/storage/level-log.ts',
    search: 'for (const r of records) replay.apply(r);',
    replace: 'for (const r of records.slice(0, 0)) replay.apply(r);',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a generation's half taken back without first storing the entries only its records held
    id: 'raft-wal-dropped-unfolded',
    file: 'raft/storage/level-log.ts',
    search:
      'await this.fold(dropped === undefined ? before : Math.min(dropped.last, this.cache.lastIndex()), gens, format);',
    replace: 'await this.fold(before, gens, format);',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a new generation written over the current one's records instead of into the other half
    id: 'raft-wal-same-half',
    file: 'raft/storage/level-log.ts',
    search: 'start_bytes: current === undefined || current.start_bytes !== 0 ? 0 : halfOf(this.walFile!),',
    replace: 'start_bytes: current === undefined ? 0 : current.start_bytes,',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // the leader proposes what a removed member forwards (its state stale: a revoked session still passes there)
    id: 'forward-from-non-member',
    file: 'src/cluster/node.ts',
    search: 'if (from !== null && !this.isMember(from)) {',
    replace: 'if (from === "nobody") {',
    tests: ['test/cluster/removed-member.test.ts'],
  },
  {
    // a node catching up from the leader's log takes an earlier removal of its id (re-added since) as its own and stops
    id: 'removal-history-taken-as-removal',
    file: 'src/cluster/removal.ts',
    search: "if (conf.index > index) return 'history';",
    replace: "if (conf.index > index && false) return 'history';",
    tests: ['test/cluster/left-out.test.ts'],
  },
  {
    // one member's word (it may be behind a re-addition) is taken as the removal of this node
    id: 'removal-judged-without-majority',
    file: 'src/cluster/removal.ts',
    search: 'without >= quorumOf(voters.length)',
    replace: 'without >= 1',
    tests: ['test/cluster/left-out.test.ts'],
  },
  {
    // members that have not applied the node's addition again yet (only the leader must have) are taken at their word
    id: 'removal-judged-without-leader',
    file: 'src/cluster/removal.ts',
    search: 'return leaderWithout && voters.length > 0',
    replace: 'return voters.length > 0',
    tests: ['test/cluster/left-out.test.ts'],
  },
  {
    // a removal that leaves too few reachable voters for a quorum is proposed: the cluster then commits nothing
    id: 'remove-member-quorum-unchecked',
    file: 'src/cluster/node.ts',
    search: 'if (risk !== null) throw risk;',
    replace: 'if (risk !== null && false) throw risk;',
    tests: ['test/cluster/remove-member.test.ts'],
    only: 'with a voter down',
  },
  {
    // a voter whose connection looks open but that has gone silent counts towards the quorum a removal leaves
    id: 'remove-member-silent-voter-reachable',
    file: 'src/cluster/node.ts',
    search: 'up.has(peer) && this.raft.heardRecently(peer)',
    replace: 'up.has(peer)',
    tests: ['test/cluster/remove-member.test.ts'],
    only: 'connected but silent',
  },
  {
    // the peer clients of removed members are kept (and their connections) for the process's life
    id: 'removed-member-client-kept',
    file: 'src/cluster/node.ts',
    search: 'if (members.has(id)) continue;',
    replace: 'if (members.has(id) || id !== "") continue;',
    tests: ['test/cluster/remove-member.test.ts'],
    only: 'with a voter down',
  },
  {
    // an identity's client certificate of the same CA may hold router-control connections, keeping routers out
    id: 'router-control-admits-any-certificate',
    file: 'src/routers/control.ts',
    search: '(socket) => admitsRouter(svc, socket, catchingUp),',
    replace: '(_socket) => true,',
    tests: ['test/api/router-control.test.ts'],
    only: 'closed after its handshake',
  },
  {
    // a removal of this node that no member confirms or denies is never acted on: a removed node runs on
    id: 'removal-fallback-never-taken',
    file: 'src/cluster/removal.ts',
    search: 'if (!history && round >= limits.judgeRounds) {',
    replace: 'if (!history && round >= limits.watchRounds) {',
    tests: ['test/cluster/left-out.test.ts'],
    only: 'judgeOwnRemoval',
  },
  {
    // a later removal is taken for history because an earlier one was: the removed node runs on
    id: 'removal-later-judged-as-earlier',
    file: 'src/cluster/removal.ts',
    search: 'if (index !== judging) {',
    replace: 'if (index !== judging && false) {',
    tests: ['test/cluster/left-out.test.ts'],
    only: 'judgeOwnRemoval',
  },
  {
    // a router enrolled through another member a moment ago is refused by a member that has not applied it yet
    id: 'router-control-refuses-before-catching-up',
    file: 'src/routers/control.ts',
    search: 'if (svc.cluster === null || waits.inFlight',
    replace: 'if (svc.cluster !== undefined || waits.inFlight',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'is admitted once the member caught up',
  },
  {
    // the upgrade does not wait for the catching-up check of its connection: refused while the check would admit it
    id: 'router-control-upgrade-skips-its-check',
    file: 'src/routers/control.ts',
    search: 'if (check === undefined) upgrade(req, socket, head);',
    replace: 'if (check !== null) upgrade(req, socket, head);',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'is admitted once the member caught up',
  },
  {
    // connections with certificates of the same CA that no router holds may all wait on a lagging member at once
    id: 'router-control-catch-ups-unbounded',
    file: 'src/routers/control.ts',
    search: 'waits.inFlight >= MAX_ROUTER_CATCH_UPS',
    replace: 'waits.inFlight >= Number.MAX_SAFE_INTEGER',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'unknown certificates at once',
  },
  {
    // an admission check that never answers holds its connection for good once its upgrade request is read
    id: 'mtls-late-verdict-unbounded',
    file: 'src/util/mtls-server.ts',
    search: 'timer = setTimeout(() => resolve(false), wait_ms);',
    replace: 'timer = setTimeout(() => resolve(false), 2 ** 31 - 1);',
    tests: ['test/cluster/peer-listener.test.ts'],
    only: 'admits later',
  },
  {
    // an extension without any certificate waits for the member to catch up (a slot and up to 4 s) before its 401
    id: 'router-extend-waits-without-certificate',
    file: 'src/auth/router-enrollment.ts',
    search: 'if (!leaf || !svc.pki) return null;',
    replace: 'if (!leaf || !svc.pki) return undefined;',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'extends its certificate on a lagging member',
  },
  {
    // a router extending its certificate on a member that has not applied its enrollment yet gets 401
    id: 'router-extend-refuses-before-catching-up',
    file: 'src/auth/router-enrollment.ts',
    search: 'if (router === undefined && svc.cluster !== null) {',
    replace: 'if (router === undefined && svc.cluster === undefined) {',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'extends its certificate on a lagging member',
  },
  {
    // an identity's or a router's certificate (same CA, no node id) may hold peer-listener connections
    id: 'peer-listener-admits-any-certificate',
    file: 'src/cluster/node.ts',
    search: '(socket) => tls.peerIdFromCert(socket.getPeerCertificate()) !== null,',
    replace: '(_socket) => true,',
    tests: ['test/cluster/peer-listener.test.ts'],
    only: 'closes a connection whose certificate names no node',
  },
  {
    // a connection with a good certificate may stay open without ever asking for its upgrade
    id: 'mtls-no-upgrade-deadline',
    file: 'src/util/mtls-server.ts',
    search: '    closeUnlessUpgraded(socket, limits.upgradeTimeout_ms);',
    replace: '',
    tests: ['test/cluster/peer-listener.test.ts'],
    only: 'does not ask for its upgrade in time',
  },
  {
    // a member that lags behind judges a membership change on its stale state (a removed caller passes)
    id: 'peer-api-membership-judged-stale',
    file: 'src/cluster/peer-api.ts',
    search: '    await ctx.handlers.readIndex();\n    refuseRemoved(ctx);',
    replace: '',
    tests: ['test/cluster/peer-api-fresh.test.ts'],
  },
  {
    // the peer API client takes any certificate of the CA for the address's host name (a router's) as the member
    id: 'peer-client-any-server',
    file: 'src/cluster/peer-api.ts',
    search: '        ...(check ? { checkServerIdentity: check } : {}),',
    replace: '',
    tests: ['test/cluster/member-identity.test.ts'],
  },
  {
    // a peer connection that asks and never reads grows the member's memory without end
    id: 'peer-unsent-unbounded',
    file: 'src/cluster/node.ts',
    search: '      if (ws.bufferedAmount > max_bytes) ws.terminate();',
    replace: '',
    tests: ['test/cluster/peer-unsent.test.ts'],
  },
  {
    // the peer API's answers carry stack traces (tRPC's development mode, NODE_ENV not production)
    id: 'peer-api-stack-traces',
    file: 'src/cluster/peer-api.ts',
    search: '  isDev: false,',
    replace: '  isDev: true,',
    tests: ['test/cluster/peer-api-fresh.test.ts'],
  },
  {
    // a node joins by itself with a peer certificate of the signing CA, which every member (a removed one too) holds
    id: 'join-with-signing-ca-certificate',
    file: 'src/cluster/peer-api.ts',
    search: '      else requireJoinCertificate(ctx);',
    replace: '',
    tests: ['test/cluster/join-certificate.test.ts'],
  },
  {
    // any certificate counts as signed by the cluster's root
    id: 'join-root-issued-unchecked',
    file: 'src/cluster/node.ts',
    search:
      '  return issuer !== undefined && issuer !== cert && cert.fingerprint256 !== ca && issuer.fingerprint256 === ca;',
    replace: '  return true;',
    tests: ['test/cluster/join-certificate.test.ts'],
  },
  {
    // the forward channel's client takes any certificate of the CA for the address's host name as the member
    id: 'forward-client-any-server',
    file: 'src/cluster/forward-channel.ts',
    search: '        ...(tls?.checkServerIdentity ? { checkServerIdentity: tls.checkServerIdentity } : {}),',
    replace: '',
    tests: ['test/cluster/member-identity.test.ts'],
    only: 'forward channel',
  },
  {
    // a removed member may still change the membership through the peer API
    id: 'peer-api-non-member-changes',
    file: 'src/cluster/peer-api.ts',
    search: 'if (ctx.from !== null && !ctx.handlers.isMember(ctx.from)) {',
    replace: 'if (ctx.from === "nobody") {',
    tests: ['test/cluster/removed-member.test.ts'],
  },
  {
    // a removed member's id is answered like any other caller's: its old certificate joins it again by itself
    id: 'removed-id-rejoins',
    file: 'src/cluster/peer-api.ts',
    search: '  const at = ctx.handlers.removedAt(ctx.from);',
    replace: '  const at = null as number | null;',
    tests: ['test/cluster/removed-member.test.ts'],
  },
  {
    // the leader takes a removed node's join that a member passed on (that member's record lagging behind)
    id: 'removed-join-passed-on',
    file: 'src/cluster/node.ts',
    search: '        const removedAt = join ? this.removalOf(id) : null;',
    replace: '        const removedAt = null as number | null;',
    tests: ['test/cluster/removed-member.test.ts'],
  },
  {
    // the membership entries leave no record of the removed ids in the replicated state
    id: 'removal-not-recorded',
    file: 'src/cluster/state-machine.ts',
    search: '        const recorded = removalCommands(decodeConfChange(e.data), e.index);',
    replace: '        const recorded: Command[] = [];',
    tests: ['test/cluster/removed-member.test.ts'],
  },
  {
    // an operator's add of a removed id leaves its record: the id stays refused
    id: 'removal-record-kept-on-add',
    file: 'src/model/cluster-removal.ts',
    search: "    if (c.type !== 'removeNode') {\n      out.push(forget);",
    replace: "    if (c.type !== 'removeNode') {",
    tests: ['test/cluster/removed-member.test.ts'],
  },
  {
    // add-member with isVoter false turns a voter already there into a learner
    id: 'cluster-add-member-demotes',
    file: 'src/cluster/node.ts',
    search: 'if (conf.voters.includes(id)) {',
    replace: 'if (conf.voters.includes(id) && voter) {',
    tests: ['test/cluster/add-member.test.ts'],
  },
  {
    // an append that rewrites entries a snapshot covers is written, leaving a log its next open finds corrupt
    id: 'raft-log-rewrites-snapshotted',
    file: 'raft/storage/level-log.ts',
    search: 'if (snapshot === null && this.snap !== null && first <= this.snap.meta.index) {',
    replace: 'if (snapshot === null && this.snap !== null && first < 0) {',
    tests: ['raft/storage/level-log.test.ts'],
  },
  {
    // a member's status poll answers are not looked at: a node removed while down starts again on its stale data
    id: 'removal-not-observed',
    file: 'src/cluster/members.ts',
    search: 'if (status !== null) this.source.observed?.(m.id, status);',
    replace: '',
    tests: ['test/cluster/removed-member.test.ts'],
  },
  {
    // a node applying its own removal is not told: it goes on serving its state, which no longer follows the log
    id: 'raft-removal-not-told',
    file: 'raft/node.ts',
    search:
      'if (confMembers(recorded.conf).has(this.id) && !members.has(this.id)) this.removedListeners.emit(e.index);',
    replace: '',
    tests: ['raft/node.test.ts'],
    only: 'onRemoved',
  },
  {
    // a node restarted on data where it recorded its removal starts (and waits for a leader it will never have)
    id: 'removed-node-starts',
    file: 'src/cluster/node.ts',
    search: 'if (removal !== null) throw removal;',
    replace: '',
    tests: ['test/cluster/left-out.test.ts'],
  },
  {
    // a member behind this one (its configuration no newer) is taken as proof of a removal
    id: 'removal-judged-by-older-conf',
    file: 'src/cluster/removal.ts',
    search: 'if (theirs === undefined || theirs.index <= mine.index) return false;',
    replace: 'if (theirs === undefined) return false;',
    tests: ['test/cluster/left-out.test.ts'],
  },
  {
    // --force-new-cluster leaves the removals it writes uncommitted: the survivor never becomes the only voter
    id: 'force-new-cluster-uncommitted',
    file: 'raft/node/force-new-cluster.ts',
    search: 'hardState: { term, vote: self, commit: last + entries.length }',
    replace: 'hardState: { term, vote: self, commit: hs.commit }',
    tests: ['test/cluster/force-new-cluster.test.ts'],
  },
  {
    // --force-new-cluster forces a member whose cluster still has a quorum (its healthy members then stop, removed)
    id: 'force-new-cluster-no-interlock',
    file: 'src/cluster/node.ts',
    search: 'if (alive !== null) {',
    replace: 'if (alive === undefined) {',
    tests: ['test/cluster/force-new-cluster.test.ts'],
  },
  {
    // --force-new-cluster on a learner removes every voter (a configuration without one: refused when applied)
    id: 'force-new-cluster-learner-not-promoted',
    file: 'raft/node/force-new-cluster.ts',
    search: 'const promote = conf.learners.includes(self);',
    replace: 'const promote = false;',
    tests: ['raft/node/force-new-cluster.test.ts'],
  },
  {
    // equal shard shares: every shard of a collection's maps doubles on about the same write
    id: 'sharded-equal-shares',
    file: 'storage/sharded.ts',
    search: 'table[s] = Math.floor(SHARDS * Math.log2(1 + (s + 0.5) / slots));',
    replace: 'table[s] = Math.floor((s * SHARDS) / slots);',
    tests: ['storage/sharded.test.ts'],
  },
  {
    // a fold (opened without the file, or a generation's half taken back) that names LevelDB's new last index
    // without storing the entries only the records held
    id: 'raft-wal-fold-all-drops-entries',
    file: 'raft/storage/level-log.ts',
    search:
      'if (last > this.ldbLast) this.segmentOps(this.cache.entries(this.ldbLast + 1, last + 1, Infinity), ops, added);',
    replace: '',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a write through LevelDB that names no new generation without carrying the entries only the records hold
    id: 'raft-wal-fallback-drops-entries',
    file: 'raft/storage/level-log.ts',
    search: '      if (snapshot === null && until > this.ldbLast + 1) {',
    replace: '      if (false && snapshot === null && until > this.ldbLast + 1) {',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a write through LevelDB that keeps the generations: their records would be replayed over it again
    id: 'raft-wal-generations-kept',
    file: 'raft/storage/level-log.ts',
    search: '    if (gens.some((g) => g.records > 0)) {',
    replace: '    if (false) {',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // compaction recording the cache's last index as LevelDB's: the entries only the records hold would look stored
    id: 'raft-wal-compaction-last',
    file: 'raft/storage/level-log.ts',
    search: 'const ldbLast = Math.max(this.ldbLast, index);',
    replace: 'const ldbLast = this.cache.lastIndex();',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a record overwriting entries LevelDB holds: LevelDB would keep the overwritten ones once the file starts over
    id: 'raft-wal-overwrite-in-record',
    file: 'raft/storage/level-log.ts',
    search:
      '    if (file === null || this.walGens.length === 0) return false;\n    if (entries.length > 0 && entries[0]!.index <= this.ldbLast) return false;\n',
    replace: '    if (file === null || this.walGens.length === 0) return false;\n',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // after starting a generation, a record written over entries the dropped generation's fold just gave LevelDB
    id: 'raft-wal-switch-overwrite',
    file: 'raft/storage/level-log.ts',
    search:
      '      if (entries.length > 0 && entries[0]!.index <= this.ldbLast) return false;\n      gen = this.walGens',
    replace: '      gen = this.walGens',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a record whose entries compaction dropped all skipped on replay, cut and all: entries it cut come back
    id: 'raft-wal-replay-cut-skipped',
    file: 'raft/storage/level-log.ts',
    search: '      this.ents.length = 0;\n      return;',
    replace: '      return;',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a scan that stops at a damaged header without looking for good records after it: acknowledged ones dropped
    id: 'raft-wal-scan-stops-silently',
    file: 'raft/storage/wal.ts',
    search: '  const later = await goodRecordAfter(reader, pos, salt);',
    replace: '  const later = null as number | null;',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // replayed records leaving an entry missing accepted (the log would have a hole)
    id: 'raft-wal-hole-accepted',
    file: 'raft/storage/level-log.ts',
    search: "      if (e === undefined) throw new LogCorruptError('wal', index, 'entry missing');\n",
    replace: '',
    tests: ['raft/storage/wal.test.ts'],
  },
  {
    // a member's reported router address shown as its ctrlAddress whatever it holds (not only host:port)
    id: 'ctrl-address-unchecked',
    file: 'src/cluster/peer-api.ts',
    search: "  return typeof at === 'string' && isPeerAddress(at) ? at : null;",
    replace: "  return typeof at === 'string' ? at : null;",
    tests: ['test/api/conformance.test.ts'],
    only: 'controllers on a cluster member',
  },
  {
    // the router control listener's address left out of the member status its peers poll
    id: 'router-address-not-reported',
    file: 'src/cluster/node.ts',
    search: '      routerAddress: this.routerAddress,',
    replace: '      routerAddress: null,',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'where routers connect',
  },
  {
    // the metrics listener in plain HTTP on any address (not only loopback)
    id: 'metrics-plain-http-anywhere',
    file: 'src/cli/main.ts',
    search: '  if (!https && !isLoopbackHost(at.host)) {',
    replace: '  if (!https && at.host === "") {',
    tests: ['test/api/metrics.test.ts'],
    only: '--metrics-listen',
  },
  {
    // the metrics listener without its connection bound
    id: 'metrics-connections-unbounded',
    file: 'src/metrics.ts',
    search: '    maxConnections: METRICS_MAX_CONNECTIONS,',
    replace: '    maxConnections: 100_000,',
    tests: ['test/api/metrics.test.ts'],
    only: '429 on connections beyond',
  },
  {
    // every scrape collects every metric anew, however often it comes
    id: 'metrics-collected-every-scrape',
    file: 'src/metrics.ts',
    search: '  const minInterval_ms = opts.minInterval_ms ?? METRICS_MIN_INTERVAL_MS;',
    replace: '  const minInterval_ms = 0;',
    tests: ['test/api/metrics.test.ts'],
    only: 'get the last collection',
  },
  {
    // a router admitted while the listener stops: its socket holds the listener's close (and the stop) up
    id: 'router-stop-admits',
    file: 'src/routers/control.ts',
    search: '    if (this.stopping) return 503;',
    replace: '    if (this.stopping && false) return 503;',
    tests: ['test/api/router-control.test.ts'],
    only: 'stop up',
  },
  {
    // an asynchronous config type schema: its validator's promise rejects unhandled and the process exits
    id: 'user-schema-async',
    file: 'src/schema/user-schema.ts',
    search: '    const fn = ajv.compile(withoutAsync(schema) as Record<string, unknown>);',
    replace: '    const fn = ajv.compile(schema);',
    tests: ['test/api/input-edges.test.ts'],
    only: '`$async` is ignored, as gojsonschema ignores it: configs are validated, nothing is left unhandled',
  },
  {
    // equality with a field's default answered by the index, which does not hold the rows leaving the field out
    id: 'index-asked-for-default',
    file: 'storage/zitiql/compile.ts',
    search: '      if (values !== null && symbol.absentAs !== undefined && values.includes(symbol.absentAs)) continue;',
    replace:
      '      if (values !== null && symbol.absentAs !== undefined && values.includes(symbol.absentAs) && false) continue;',
    tests: ['test/api/input-edges.test.ts'],
    only: 'finds the rows that leave the field out (they show the default; the index does not hold them)',
  },
  {
    // session creates racing on one node each write a session of their own
    id: 'session-create-twice',
    file: 'src/ops/sessions.ts',
    search: '        let write = creating.get(key);',
    replace: '        let write: Promise<string> | undefined;',
    tests: ['test/api/session-create-once.test.ts'],
    only: 'make one session; every answer names it',
  },
  {
    // sessions kept after their identity lost access to the service
    id: 'session-enforcer-off',
    file: 'src/auth/session-enforcer.ts',
    search: '      if (this.lostAccess(id)) lost.push(id);',
    replace: '      if (this.lostAccess(id) && false) lost.push(id);',
    tests: ['test/api/session-enforcer.test.ts'],
    only: 'go when the identity loses the attribute that granted them; sessions of other identities stay',
  },
  {
    // a membership change for an id no node can have (`__proto__`: its address becomes the object prototype's)
    id: 'member-id-unchecked',
    file: 'src/cluster/node.ts',
    search: '    if (!NODE_ID_PATTERN.test(id)) {',
    replace: '    if (!NODE_ID_PATTERN.test(id) && false) {',
    tests: ['test/cluster/add-member.test.ts'],
  },
  {
    // the local cluster's admin password on n1's command line, readable with ps
    id: 'local-password-on-command-line',
    file: 'src/cluster/processes.ts',
    search: '  return [...args, ...(spec.extraArgs ?? [])];',
    replace:
      "  return [...args, ...(spec.adminPassword ? ['--admin-password', spec.adminPassword] : []), ...(spec.extraArgs ?? [])];",
    tests: ['test/cluster/local.test.ts'],
  },
  {
    // a config type's schema of any size: its validator overflows the stack on the first config write (500)
    id: 'user-schema-unbounded',
    file: 'src/schema/user-schema.ts',
    search: '  if (nodesBeyond(schema, MAX_USER_SCHEMA_NODES)) {',
    replace: '  if (nodesBeyond(schema, Number.MAX_SAFE_INTEGER)) {',
    tests: ['test/api/input-edges.test.ts'],
    only: 'is refused above 1000 objects and arrays, so no config write meets a validator that overflows',
  },
  {
    // a number beyond a double's range reaches the handlers as Infinity (stored, it reads back as null)
    id: 'json-infinity-accepted',
    file: 'http/json-body.ts',
    search: '  if (scan.largeNumber) {',
    replace: '  if (scan.largeNumber && false) {',
    tests: ['test/api/input-edges.test.ts'],
    only: 'beyond a 64-bit float (JSON.parse makes them Infinity) are refused, naming the field',
  },
  {
    // the admin lane chosen by the username alone: anyone can fill it, and tell an admin's name by its 429s
    id: 'login-admin-lane-by-name',
    file: 'src/auth/rate-limit.ts',
    search: '  return who.admin === true && isAdminSource(who.source) ? adminGate : loginGate;',
    replace: '  return who.admin === true ? adminGate : loginGate;',
    tests: ['test/api/rate-limit.test.ts'],
    only: "answers an admin's username as any other from a source no admin logged in from (no enumeration)",
  },
  {
    // a full login queue refuses every newcomer: one flooding source locks the others out
    id: 'login-gate-no-eviction',
    file: 'src/auth/rate-limit.ts',
    search: '      if (this.waiting >= this.capacity() && !this.evictFromLargest(held)) throw this.refusal();',
    replace: '      if (this.waiting >= this.capacity()) throw this.refusal();',
    tests: ['src/auth/rate-limit.test.ts'],
  },
  {
    // a write that needs a newer state-machine version than the cluster's proposed anyway during a rolling upgrade
    id: 'smv-gate-off',
    file: 'src/cluster/node.ts',
    search: '    if (needed <= cluster) return null;',
    replace: '    if (needed <= cluster || needed > 0) return null;',
    tests: ['test/cluster/state-machine-version.test.ts'],
    only: 'refuses the writes version 2 introduced',
  },
  {
    // the cluster's version raised past a member that is down (and may run the older release)
    id: 'smv-raise-past-member-down',
    file: 'src/cluster/node.ts',
    search: '      if (!m.online || m.status === null) return;',
    replace: '      if (!m.online || m.status === null) continue;',
    tests: ['test/cluster/state-machine-version.test.ts'],
  },
  {
    // a member applies a raise beyond its own release instead of stopping at it
    id: 'smv-raise-beyond-release',
    file: 'src/model/cluster-state.ts',
    search: '    if (version > supported) {',
    replace: '    if (version > supported + 1) {',
    tests: ['test/cluster/state-machine-version.test.ts'],
    only: 'raiseStateMachineVersion',
  },
  {
    // a node of an older release added to a cluster past it
    id: 'smv-older-member-added',
    file: 'src/cluster/node.ts',
    search: '    if (version < cluster) throw new MemberTooOldError(id, version, cluster);',
    replace: '    if (version < cluster - 1) throw new MemberTooOldError(id, version, cluster);',
    tests: ['test/cluster/state-machine-version.test.ts'],
  },
  {
    // an older release started on data the cluster raised past it
    id: 'smv-older-release-starts',
    file: 'src/cluster/node.ts',
    search: '    if (tooOld !== null) throw new Error(tooOld);',
    replace: '    if (tooOld !== null && false) throw new Error(tooOld);',
    tests: ['test/cluster/state-machine-version.test.ts'],
  },
  {
    // a CA of the path out of its validity waived like the leaf's own expiry (allowExpiredCerts)
    id: 'chain-issuer-expiry-waivable',
    file: 'src/pki/verify.ts',
    search: '    if (anchors.some((r) => same(r, c))) return issuerOutOfTime ?? leafOutOfTime ?? { ok: true, chain };',
    replace: '    if (anchors.some((r) => same(r, c))) return leafOutOfTime ?? { ok: true, chain };',
    tests: ['test/api/cas.test.ts', 'test/pki/verify.test.ts'],
  },
  {
    // enrollment JWTs signed with a key the API certificate does not hold: OpenZiti's SDKs and CLI refuse them
    id: 'enroll-jwt-not-api-key',
    file: 'src/pki/enrollment-jwt.ts',
    search: '  return apiCertSigner(svc) ?? controllerSigner(svc);',
    replace: '  return controllerSigner(svc);',
    tests: ['test/api/enrollment-jwt.test.ts'],
  },
  {
    // a malformed pipelined request refused at once: the answer to the write before it is lost with the connection
    id: 'node-pipelined-error-first',
    file: 'http/engines/node.ts',
    search: '    if (pending !== undefined && !pending.writableFinished && !pending.destroyed) {',
    replace: '    if (pending !== undefined && false) {',
    tests: ['http/engines/edge.test.ts'],
    only: 'pipelined behind one still being answered',
  },
  {
    // a TLS socket that never completes its handshake held for Node's 120 s
    id: 'node-handshake-unbounded',
    file: 'http/engines/node.ts',
    search: '          handshakeTimeout: headers_ms,',
    replace: '          handshakeTimeout: 120_000,',
    tests: ['http/engines/engines.test.ts'],
    only: 'counts sockets still in their TLS handshake',
  },
  {
    // a PATCH's null clears the field: the CLI's ext-jwt-signer update wipes its scopes
    id: 'patch-null-clears',
    file: 'src/api/register.ts',
    search: "  const kept = op.method === 'PATCH' ? withoutPatchNulls(given) : nilArraysAsEmpty(op.body, given);",
    replace: '  const kept = nilArraysAsEmpty(op.body, given);',
    tests: ['test/api/patch-nulls.test.ts'],
  },
  {
    // a body in any number of pieces accepted: a mebibyte in one-byte chunks costs seconds of the event loop
    id: 'body-pieces-unbounded',
    file: 'http/engines/body.ts',
    search: '    if (++this.pieces > MAX_BODY_PIECES) return false;',
    replace: '    ++this.pieces;',
    tests: ['http/engines/edge.test.ts'],
  },
  {
    // a revocation answered once applied on the member that took it, before the others refuse the token
    id: 'revoke-answered-before-everywhere',
    file: 'src/api/services.ts',
    search: '    if (this.cluster !== null && revokesAccess(cmd)) await this.cluster.appliedEverywhere();',
    replace: '    if (this.cluster !== null && revokesAccess(cmd) && false) await this.cluster.appliedEverywhere();',
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: 'a revocation is answered once every member applied it',
  },
  {
    // a revocation's wait satisfied by a round that may have started before its write was applied
    id: 'revoke-joins-running-round',
    file: 'src/cluster/applied-everywhere.ts',
    search: '    if (this.queued !== null) return this.queued;',
    replace: '    if (this.running !== null) return this.running;\n    if (this.queued !== null) return this.queued;',
    tests: ['src/cluster/applied-everywhere.test.ts'],
  },
  {
    // disabling an identity answered before the other members refuse its sessions
    id: 'revoke-disable-not-waited',
    file: 'src/model/revokes.ts',
    search: "const REVOKING_CUSTOM: ReadonlySet<string> = new Set(['applyRevocation', 'disableIdentity']);",
    replace: "const REVOKING_CUSTOM: ReadonlySet<string> = new Set(['applyRevocation']);",
    tests: ['test/cluster/credentials-across-members.test.ts'],
    only: "an admin's delete of a session and an identity's disable wait the same way",
  },
  {
    // the fabric API's routers shown to any authenticated caller, not only admins
    id: 'fabric-routers-any-session',
    file: 'src/ops/fabric.ts',
    search: "  const base = { apis: [], tags: ['Router'], access: 'admin' as const };",
    replace: "  const base = { apis: [], tags: ['Router'], access: 'authenticated' as const };",
    tests: ['test/api/fabric-reads.test.ts'],
    only: 'admins only',
  },
];

// ---------------------------------------------------------------------------------------------------------------

function git(args) {
  const r = spawnSync('git', args, { cwd: REPO, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

function occurrences(text, search) {
  let n = 0;
  for (let at = text.indexOf(search); at !== -1; at = text.indexOf(search, at + 1)) n++;
  return n;
}

/** Every mutant's search text occurs exactly once in its file (fail before running anything otherwise). */
function checkList(mutants) {
  const problems = [];
  const ids = new Set();
  for (const m of mutants) {
    if (ids.has(m.id)) problems.push(`${m.id}: duplicate id`);
    ids.add(m.id);
    const path = join(REPO, m.file);
    if (!existsSync(path)) {
      problems.push(`${m.id}: ${m.file} does not exist`);
      continue;
    }
    const n = occurrences(readFileSync(path, 'utf8'), m.search);
    if (n !== 1) problems.push(`${m.id}: the search text occurs ${n} times in ${m.file} (must be exactly once)`);
    if (m.search === m.replace) problems.push(`${m.id}: the replacement changes nothing`);
    if (!Array.isArray(m.tests) || m.tests.length === 0) problems.push(`${m.id}: no tests named`);
    for (const t of m.tests ?? []) if (!existsSync(join(REPO, t))) problems.push(`${m.id}: no test path ${t}`);
  }
  return problems;
}

/** A copy of the working tree (tracked and untracked-but-not-ignored files) beside links to what tests need. */
export function makeWorkspace(root, name) {
  const dir = join(root, name, 'keel');
  mkdirSync(dir, { recursive: true });
  const files = git(['ls-files', '-z', '--cached', '--others', '--exclude-standard']).split('\0').filter(Boolean);
  for (const f of files) {
    const from = join(REPO, f);
    if (!existsSync(from)) continue; // deleted in the working tree
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    cpSync(from, join(dir, f));
  }
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'), 'dir');
  // the API tests read OpenZiti's published spec from a folder beside the repository: link the same one
  const beside = join(REPO, '..', 'shared');
  if (existsSync(beside)) symlinkSync(realpathSync(beside), join(root, name, 'shared'), 'dir');
  return dir;
}

/** A rough cost of a mutant's run: 2 for tests that start clusters or run the simulator, else 1. */
function weight(m) {
  return m.tests.some((t) => t.startsWith('test/cluster/') || t.startsWith('raft/sim/')) ? 2 : 1;
}

/**
 * A persistent vitest in workspace `dir` (scripts/mutants-worker.mjs): `run(m)` resolves with its answer, or with
 * `{ timedOut: true }` after TIMEOUT_MS (the caller then kills it), or `{ crashed }` if it exits.
 */
export function startWorker(dir) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(dir, 'scripts', 'mutants-worker.mjs'), dir], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      detached: true, // its own process group: a timeout kills it with every process its tests started
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr = (stderr + d).slice(-4000);
    });
    let pending = null;
    const kill = () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    // a send on a channel the worker closed: answered as a crash by 'exit'
    child.on('error', () => {});
    let exited = null;
    child.on('exit', (code) => {
      exited = `exit ${code}: ${stderr}`;
      const p = pending;
      pending = null;
      if (p !== null) p.resolve({ crashed: `exit ${code}: ${stderr}` });
      else reject(new Error(`the mutant worker exited (${code}) before it was ready: ${stderr}`));
    });
    child.on('message', (msg) => {
      if (msg.ready) {
        resolve({
          kill,
          run: (m) =>
            new Promise((res) => {
              if (exited !== null) {
                res({ crashed: exited });
                return;
              }
              const started = Date.now();
              const timer = setTimeout(() => {
                pending = null;
                res({ timedOut: true, ms: Date.now() - started });
              }, TIMEOUT_MS);
              pending = {
                resolve: (r) => {
                  clearTimeout(timer);
                  res(r);
                },
              };
              const { id, file, search, replace, tests, only } = m;
              child.send({ id, file, search, replace, tests, only });
            }),
        });
        return;
      }
      const p = pending;
      pending = null;
      p?.resolve(msg);
    });
  });
}

/**
 * Runs `runs` (mutants, or baselines shaped as mutants) on one worker per workspace, each taking the next from the
 * list; `onResult(run, answer)` for each. A worker that crashed or timed out is killed, the file it was testing put
 * back as it was before the run, and another started for the next run.
 */
async function drain(workspaces, runs, onResult) {
  let next = 0;
  const slot = async (dir) => {
    let w = null;
    try {
      while (next < runs.length) {
        const m = runs[next++];
        w ??= await startWorker(dir);
        const original = readFileSync(join(dir, m.file), 'utf8');
        const r = await w.run(m);
        if (r.crashed !== undefined || r.timedOut) {
          w.kill();
          w = null;
          writeFileSync(join(dir, m.file), original);
        }
        onResult(m, r);
      }
    } finally {
      w?.kill();
    }
  };
  await Promise.all(workspaces.map(slot));
}

async function main() {
  const args = process.argv.slice(2);
  const strict = args.includes('--strict');
  const baseline = !args.includes('--no-baseline');
  const verbose = args.includes('--verbose');
  const only = args.filter((a) => !a.startsWith('--'));
  const unknown = only.filter((id) => !MUTANTS.some((m) => m.id === id));
  if (unknown.length > 0) {
    console.error(`unknown mutant ids: ${unknown.join(', ')}\nknown: ${MUTANTS.map((m) => m.id).join(', ')}`);
    process.exit(2);
  }
  const mutants = only.length > 0 ? MUTANTS.filter((m) => only.includes(m.id)) : MUTANTS;
  const problems = checkList(MUTANTS);
  if (problems.length > 0) {
    console.error(`the mutant list is out of date:\n  ${problems.join('\n  ')}`);
    process.exit(2);
  }

  // one mutant per core, and one more: most of a mutant's run waits on timers, sockets and child processes (the 160
  // mutants took 352 s on two cores with two at a time, 302 s with three); KEEL_MUTANT_SLOTS sets it
  const wanted = Number(process.env.KEEL_MUTANT_SLOTS ?? availableParallelism() + 1);
  if (!Number.isInteger(wanted) || wanted < 1 || wanted > 64) {
    console.error(`KEEL_MUTANT_SLOTS must be a whole number from 1 to 64, not ${process.env.KEEL_MUTANT_SLOTS}`);
    process.exit(2);
  }
  const slots = Math.min(wanted, mutants.length);
  const root = mkdtempSync(join(tmpdir(), 'keel-mutants-'));
  const started = Date.now();
  try {
    const workspaces = Array.from({ length: slots }, (_, i) => makeWorkspace(root, `w${i}`));

    if (baseline) {
      // The same tests, with the same filters, must pass without any mutation and run at least one test, or a
      // "killed" mutant proves nothing: each distinct (tests, only) once, through the same workers.
      const seen = new Map();
      for (const m of mutants) {
        const key = JSON.stringify([m.tests, m.only ?? null]);
        if (!seen.has(key)) seen.set(key, { ...m, id: `baseline of ${m.id}`, replace: m.search });
      }
      const runs = [...seen.values()];
      process.stdout.write(`baseline: ${runs.length} test selections without mutations … `);
      const failures = [];
      const t0 = Date.now();
      await drain(workspaces, runs, (b, r) => {
        if (r.crashed !== undefined || r.timedOut || r.killed || r.ran === 0)
          failures.push(
            `${b.id}: ${r.crashed ?? (r.timedOut ? 'timed out' : r.ran === 0 ? 'no test ran' : [...r.failed, ...r.errors].join('; '))}`,
          );
      });
      if (failures.length > 0) {
        console.log('FAILED');
        for (const f of failures) console.error(`  ${f.split('\n')[0]}`);
        console.error('the tests fail (or select nothing) without any mutation: fix them first');
        process.exitCode = 1;
        return;
      }
      console.log(`ok (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    }

    const results = [];
    // the slow ones first (whole in-process clusters, the simulator), so the workers end together rather than one
    // finishing a 20 s mutant alone at the end; results are printed in the list's order all the same
    const queue = [...mutants].sort((a, b) => weight(b) - weight(a));
    const problems = [];
    await drain(workspaces, queue, (m, r) => {
      if (r.crashed !== undefined) {
        problems.push(`${m.id}: the mutant worker failed: ${r.crashed}`);
        console.log(`ERROR    ${m.id}: the mutant worker failed`);
        return;
      }
      if (!r.timedOut && !r.killed && r.ran === 0) {
        // a filter that selects nothing proves nothing: a list problem, not a survivor
        problems.push(`${m.id}: no test ran (tests ${m.tests.join(' ')}${m.only ? `, only "${m.only}"` : ''})`);
        console.log(`ERROR    ${m.id}: no test ran`);
        return;
      }
      const killed = r.killed || r.timedOut;
      results.push({ m, killed, timedOut: r.timedOut, ms: r.ms });
      console.log(`${killed ? 'killed  ' : 'SURVIVED'} ${m.id} (${(r.ms / 1000).toFixed(1)} s)`);
      if (verbose && killed)
        for (const l of [...r.failed, ...r.errors].slice(0, 5)) console.log(`           ${l.split('\n')[0]}`);
    });

    results.sort((a, b) => mutants.indexOf(a.m) - mutants.indexOf(b.m));
    const rows = results.map(({ m, killed, timedOut, ms }) => [
      m.id,
      m.file,
      killed ? (timedOut ? 'killed (timeout)' : 'killed') : m.pending ? 'survived: PENDING' : 'SURVIVED',
      `${(ms / 1000).toFixed(1)} s`,
      m.tests.join(' '),
    ]);
    const head = ['mutant', 'file', 'result', 'time', 'tests'];
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (cells) =>
      cells
        .map((c, i) => c.padEnd(widths[i]))
        .join('  ')
        .trimEnd();
    console.log(`\n${line(head)}\n${line(widths.map((w) => '-'.repeat(w)))}`);
    for (const r of rows) console.log(line(r));

    const survivors = results.filter((r) => !r.killed && (strict || !r.m.pending));
    const pending = results.filter((r) => !r.killed && r.m.pending);
    const stale = results.filter((r) => r.killed && r.m.pending);
    for (const r of pending) console.log(`\npending survivor ${r.m.id}: ${r.m.pending}`);
    for (const r of stale) console.log(`\n${r.m.id} is killed now: remove its \`pending\` mark`);
    const total = ((Date.now() - started) / 1000).toFixed(0);
    console.log(
      `\n${results.filter((r) => r.killed).length}/${results.length} killed, ${pending.length} pending, in ${total} s on ${slots} workers`,
    );
    for (const p of problems) console.error(p);
    if (problems.length > 0) process.exitCode = 1;
    if (survivors.length > 0) {
      console.error(
        `surviving mutants (no test notices these rules broken): ${survivors.map((r) => r.m.id).join(', ')}`,
      );
      process.exitCode = 1;
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

// run as a script; imported (by the runner's own test), only the helpers are used
if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
