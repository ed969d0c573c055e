/**
 * The identity create's extra step (`alsoOnCreate`): synchronous, with no commands, when the body asks for no
 * enrollment, so the create handler does not await it; a promise only when an enrollment is asked for. (What the
 * enrollment commands do is end-to-end tested in enroll.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import type { Services } from '../../src/api/services.js';
import { identities } from '../../src/model/identity.js';

const at = '2026-11-26T00:00:00.000Z';
// the step reads nothing from the services unless an enrollment is asked for: a clock is all it may touch
const svc = { clock: { now: () => 0 } } as unknown as Services;

describe('identity create: the enrollment step', () => {
  it('answers [] at once, not a promise, when no enrollment is asked for', () => {
    const out = identities.alsoOnCreate!('id1', { name: 'n', type: 'User', isAdmin: false }, svc, at);
    expect(out).toEqual([]);
    expect(out instanceof Promise).toBe(false);
  });

  it('answers a promise when an enrollment object is given (here one asking for no method: no commands)', async () => {
    const out = identities.alsoOnCreate!('id1', { name: 'n', type: 'User', isAdmin: false, enrollment: {} }, svc, at);
    expect(out instanceof Promise).toBe(true);
    expect(await out).toEqual([]);
  });
});
