import { describe, expect, it } from 'vitest';
import { cleanHex, evaluateCheck, type IdentityPosture, putProcess, versionSatisfies } from './posture.js';
import type { RowFor } from './rows.js';

const AT = '2026-11-28T00:00:00.000Z';
const session = { id: 's1', identityId: 'i1' } as unknown as RowFor<'api-sessions'>;
const check = (fields: Record<string, unknown>) =>
  ({ id: 'c1', name: 'c', createdAt: AT, updatedAt: AT, ...fields }) as unknown as RowFor<'posture-checks'>;
const passes = (c: RowFor<'posture-checks'>, identity: IdentityPosture) =>
  evaluateCheck(c, session, { identity }, Date.parse(AT)).isPassing;
const device = (): IdentityPosture => ({ processes: new Map(), lastAt: AT });

describe('posture checks judged as OpenZiti judges them', () => {
  it('PROCESS: the report made for the check (its id), whatever its path', () => {
    const c = check({ id: 'c1', typeId: 'PROCESS', process: { osType: 'Windows', path: 'C:\\av.exe' } });
    const d = device();
    putProcess(d, {
      postureCheckId: 'other',
      path: 'C:\\av.exe',
      isRunning: true,
      hash: '',
      signerFingerprints: [],
      at: AT,
    });
    expect(passes(c, d)).toBe(false);
    putProcess(d, {
      postureCheckId: 'c1',
      path: 'C:\\elsewhere.exe',
      isRunning: true,
      hash: '',
      signerFingerprints: [],
      at: AT,
    });
    expect(passes(c, d)).toBe(true);
    // two checks on one path keep a report each
    putProcess(d, {
      postureCheckId: 'other',
      path: 'C:\\elsewhere.exe',
      isRunning: false,
      hash: '',
      signerFingerprints: [],
      at: AT,
    });
    expect(passes(c, d)).toBe(true);
  });

  it('PROCESS_MULTI: the latest report of each path', () => {
    const c = check({ typeId: 'PROCESS_MULTI', semantic: 'AllOf', processes: [{ osType: 'Linux', path: '/bin/a' }] });
    const d = device();
    putProcess(d, { postureCheckId: 'x', path: '/bin/a', isRunning: true, hash: '', signerFingerprints: [], at: AT });
    expect(passes(c, d)).toBe(true);
  });

  it('signer fingerprints read as CleanHexString reads them; hashes case folded', () => {
    expect(cleanHex('AB:cd-12 EF')).toBe('abcd12ef');
    const c = check({
      typeId: 'PROCESS',
      process: { osType: 'Windows', path: 'p', hashes: ['AB12'], signerFingerprint: 'cdcd' },
    });
    const d = device();
    putProcess(d, {
      postureCheckId: 'c1',
      path: 'p',
      isRunning: true,
      hash: 'ab12',
      signerFingerprints: ['CD:CD'].map(cleanHex),
      at: AT,
    });
    expect(passes(c, d)).toBe(true);
  });

  it('OS: a type listed twice counts by its last entry; versions must be major.minor.patch', () => {
    const c = check({
      typeId: 'OS',
      operatingSystems: [
        { type: 'Windows', versions: [] },
        { type: 'Windows', versions: ['>=11.0.0'] },
      ],
    });
    const d = device();
    d.os = { postureCheckId: 'c1', type: 'windows', version: '10.0.19041', build: '', at: AT };
    expect(passes(c, d)).toBe(false);
    d.os.version = '11.0.22631';
    expect(passes(c, d)).toBe(true);
    expect(versionSatisfies('10.0', '>=10.0.0')).toBe(false);
    expect(versionSatisfies('10', '>=10.0.0')).toBe(false);
    expect(versionSatisfies('5.15.0-91-generic', '>=5.0.0')).toBe(true);
  });
});
