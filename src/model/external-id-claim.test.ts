/**
 * `externalIdClaim` extraction per location, matcher and parser (as OpenZiti's x509-claims), on a certificate
 * made by openssl, and the validation that refuses claims that could never resolve.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError } from '../api/errors.js';
import { x509 } from '../pki/crypto.js';
import { checkExternalIdClaim, type ExternalIdClaim, externalIdOf, MAX_CLAIM_INDEX } from './external-id-claim.js';

const dir = mkdtempSync(join(tmpdir(), 'keel-claim-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A self-signed certificate by openssl with the given subject and SANs (DER). */
function cert(subj: string, san?: string): Uint8Array {
  const args = ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  args.push('-keyout', join(dir, 'k.pem'), '-days', '1', '-subj', subj);
  if (san) args.push('-addext', `subjectAltName=${san}`);
  const r = spawnSync('/usr/bin/openssl', args, { encoding: 'utf8', timeout: 20_000 });
  expect(r.status).toBe(0);
  return new Uint8Array(new x509.X509Certificate(r.stdout).rawData);
}

const claim = (c: Partial<ExternalIdClaim>): ExternalIdClaim => ({
  matcher: 'ALL',
  matcherCriteria: '',
  parser: 'NONE',
  parserCriteria: '',
  index: 0,
  ...c,
});

describe('externalIdClaim extraction', () => {
  let der: Uint8Array;
  beforeAll(() => {
    der = cert(
      '/O=Acme/CN=tenant-7:device-42',
      'URI:spiffe://example.org/device/42,URI:https://acme.example/u/9,email:dev42@acme.example,email:ops@other.example',
    );
  });

  it('COMMON_NAME: ALL, PREFIX and SUFFIX (stripping the criteria), SPLIT with an index', () => {
    expect(externalIdOf(claim({ location: 'COMMON_NAME' }), der)).toBe('tenant-7:device-42');
    const prefix = claim({ location: 'COMMON_NAME', matcher: 'PREFIX', matcherCriteria: 'tenant-7:' });
    expect(externalIdOf(prefix, der)).toBe('device-42');
    expect(externalIdOf({ ...prefix, matcherCriteria: 'tenant-8:' }, der)).toBeNull();
    const suffix = claim({ location: 'COMMON_NAME', matcher: 'SUFFIX', matcherCriteria: ':device-42' });
    expect(externalIdOf(suffix, der)).toBe('tenant-7');
    const split = claim({ location: 'COMMON_NAME', parser: 'SPLIT', parserCriteria: ':' });
    expect(externalIdOf({ ...split, index: 0 }, der)).toBe('tenant-7');
    expect(externalIdOf({ ...split, index: 1 }, der)).toBe('device-42');
    expect(externalIdOf({ ...split, index: 2 }, der)).toBeNull();
  });

  it('SAN_URI: ALL takes every URI in order, SCHEME only that scheme (whole URI), SPLIT on the URI text', () => {
    expect(externalIdOf(claim({ location: 'SAN_URI' }), der)).toBe('spiffe://example.org/device/42');
    expect(externalIdOf(claim({ location: 'SAN_URI', index: 1 }), der)).toBe('https://acme.example/u/9');
    const scheme = claim({ location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'https' });
    expect(externalIdOf(scheme, der)).toBe('https://acme.example/u/9');
    expect(externalIdOf({ ...scheme, matcherCriteria: 'urn' }, der)).toBeNull();
    const split = claim({ location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'SPLIT' });
    expect(externalIdOf({ ...split, parserCriteria: '/', index: 4 }, der)).toBe('42');
  });

  it('SAN_EMAIL: SUFFIX keeps the matching addresses, stripped; PREFIX; index past the claims', () => {
    const suffix = claim({ location: 'SAN_EMAIL', matcher: 'SUFFIX', matcherCriteria: '@acme.example' });
    expect(externalIdOf(suffix, der)).toBe('dev42');
    expect(externalIdOf({ ...suffix, index: 1 }, der)).toBeNull();
    expect(externalIdOf(claim({ location: 'SAN_EMAIL', index: 1 }), der)).toBe('ops@other.example');
    const prefix = claim({ location: 'SAN_EMAIL', matcher: 'PREFIX', matcherCriteria: 'ops@' });
    expect(externalIdOf(prefix, der)).toBe('other.example');
  });

  it('a certificate without the location resolves to nothing; an empty claim is no id', () => {
    const bare = cert('/CN=bare');
    expect(externalIdOf(claim({ location: 'SAN_URI' }), bare)).toBeNull();
    expect(externalIdOf(claim({ location: 'SAN_EMAIL' }), bare)).toBeNull();
    const split = claim({ location: 'COMMON_NAME', parser: 'SPLIT', parserCriteria: 'bare' });
    expect(externalIdOf(split, bare)).toBeNull(); // "" before the separator
    expect(externalIdOf(claim({ location: 'COMMON_NAME' }), new Uint8Array([1, 2, 3]))).toBeNull();
  });
});

describe('externalIdClaim validation', () => {
  const refused = (c: ExternalIdClaim): string | null => {
    try {
      checkExternalIdClaim(c);
      return null;
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      return `${err.code} ${(err.cause as { field: string }).field}`;
    }
  };

  it('accepts every supported combination and an unconfigured claim', () => {
    expect(refused(claim({ location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe' }))).toBeNull();
    expect(refused(claim({ location: 'SAN_EMAIL', matcher: 'SUFFIX', matcherCriteria: '@x' }))).toBeNull();
    expect(refused(claim({ location: 'COMMON_NAME', parser: 'SPLIT', parserCriteria: '-' }))).toBeNull();
    expect(refused(claim({ location: null }))).toBeNull();
    expect(refused(claim({ location: 'COMMON_NAME', index: MAX_CLAIM_INDEX }))).toBeNull();
  });

  it('refuses matchers a location does not support, missing criteria, bad parsers and indexes', () => {
    const v = 'INVALID_FIELD externalIdClaim'; // COULD_NOT_VALIDATE on the wire
    expect(refused(claim({ location: 'SAN_URI', matcher: 'PREFIX', matcherCriteria: 'x' }))).toBe(v);
    expect(refused(claim({ location: 'COMMON_NAME', matcher: 'SCHEME', matcherCriteria: 'x' }))).toBe(v);
    expect(refused(claim({ location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: '' }))).toBe(v);
    expect(refused(claim({ location: 'SAN_EMAIL', matcher: 'SUFFIX', matcherCriteria: null }))).toBe(v);
    expect(refused(claim({ location: 'COMMON_NAME', parser: 'SPLIT', parserCriteria: '' }))).toBe(v);
    expect(refused(claim({ location: 'COMMON_NAME', parser: null }))).toBe(v);
    expect(refused(claim({ location: 'COMMON_NAME', matcher: null }))).toBe(v);
    expect(refused(claim({ location: 'COMMON_NAME', matcher: 'PREFIX', matcherCriteria: 'x'.repeat(1025) }))).toBe(v);
    expect(refused(claim({ location: 'COMMON_NAME', index: -1 }))).toBe('INVALID_FIELD externalIdClaim.index');
    expect(refused(claim({ location: 'COMMON_NAME', index: MAX_CLAIM_INDEX + 1 }))).toBe(
      'INVALID_FIELD externalIdClaim.index',
    );
    expect(refused(claim({ location: 'SUBJECT' }))).toBe('INVALID_FIELD externalIdClaim.location');
  });
});
