import { describe, expect, it } from 'vitest';
import { dataEnvelope } from '../../http/errors.js';
import { created } from './respond.js';

describe('created', () => {
  it('writes the envelope JSON.stringify would, escaping what needs it', () => {
    for (const id of ['Xk3.9aZ1Q-', 'with "quotes" and \\ and \u2028']) {
      const res = created('identities', id);
      const expected = dataEnvelope({ _links: { self: { href: `./identities/${id}` } }, id }, {}, 201);
      expect(res.status).toBe(201);
      expect(res.body).toBe(expected.body);
      expect(res.headers).toEqual(expected.headers);
    }
  });
});
