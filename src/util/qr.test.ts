import { describe, expect, it } from 'vitest';
import { readQrPng } from '../../test/support/qr-read.js';
import { qrModules, qrPng } from './qr.js';

describe('QR code + PNG', () => {
  const texts = [
    'a',
    'otpauth://totp/ziti.dev:alice?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=ziti.dev',
    `otpauth://totp/ziti.dev:${'x'.repeat(150)}?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=ziti.dev`,
    'ü€ unicode and 数字',
    'y'.repeat(600),
  ];
  for (const text of texts) {
    it(`a reader decodes what was encoded (${text.length} chars)`, () => {
      expect(readQrPng(qrPng(text, 4))).toBe(text);
    });
  }

  it('sizes follow the version (21 modules for version 1) and too long a text is refused', () => {
    expect(qrModules('hello').length).toBe(21);
    expect(() => qrModules('z'.repeat(3000))).toThrow(RangeError);
  });
});
