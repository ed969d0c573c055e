/** `keel run`'s choice of scheme and engine (src/cli/main.ts listenerScheme), without starting a process. */
import { describe, expect, it } from 'vitest';
import { listenerScheme } from '../../src/cli/main.js';

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  return 'accepted';
};

describe('keel run: HTTPS by default, plain HTTP on loopback only', () => {
  it('HTTPS on the node engine unless told otherwise, on any address', () => {
    for (const host of ['127.0.0.1', '0.0.0.0', '10.0.0.1', '::', 'ctl.example.com']) {
      expect(listenerScheme({}, host)).toEqual({ https: true, engine: 'node' });
      expect(listenerScheme({ tls: true, engine: 'node' }, host)).toEqual({ https: true, engine: 'node' });
    }
  });

  it('--insecure-http: plain HTTP on uWS (or node) on loopback, refused on any other address', () => {
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', 'localhost']) {
      expect(listenerScheme({ 'insecure-http': true }, host)).toEqual({ https: false, engine: 'uws' });
      expect(listenerScheme({ 'insecure-http': true, engine: 'node' }, host)).toEqual({ https: false, engine: 'node' });
    }
    for (const host of ['0.0.0.0', '::', '', '10.0.0.1', 'ctl.example.com', '::ffff:10.0.0.1']) {
      expect(refusal(() => listenerScheme({ 'insecure-http': true }, host))).toContain('--insecure-http is refused');
    }
  });

  it('uWS serves plain HTTP only; --tls and --insecure-http exclude each other; unknown engines refused', () => {
    expect(refusal(() => listenerScheme({ engine: 'uws' }, '127.0.0.1'))).toContain('serves plain HTTP only');
    expect(refusal(() => listenerScheme({ tls: true, 'insecure-http': true }, '127.0.0.1'))).toContain('exclude');
    expect(refusal(() => listenerScheme({ engine: 'apache' }, '127.0.0.1'))).toContain('invalid --engine');
  });
});
