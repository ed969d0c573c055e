import { describe, expect, it } from 'vitest';
import { contentTypeError, mediaTypeOf } from './content-type.js';
import { createRequest } from './request.js';

const req = (contentType: string | undefined, body = '{}') =>
  createRequest({
    method: 'POST',
    url: '/x',
    headers: contentType === undefined ? {} : { 'content-type': contentType },
    body: Buffer.from(body),
  });

describe('mediaTypeOf', () => {
  it('lower-cases, drops parameters, defaults a missing type to application/octet-stream, refuses garbage', () => {
    expect(mediaTypeOf('Application/JSON; charset=utf-8')).toBe('application/json');
    expect(mediaTypeOf(undefined)).toBe('application/octet-stream');
    expect(mediaTypeOf('  ')).toBe('application/octet-stream');
    expect(mediaTypeOf('json')).toBeNull();
    expect(mediaTypeOf('; charset=utf-8')).toBeNull();
    expect(mediaTypeOf('text/plain ; x=1')).toBe('text/plain');
  });
});

describe('contentTypeError', () => {
  const JSON_ONLY = ['application/json'];
  it('passes bodiless requests whatever their type', () => {
    expect(contentTypeError(req('text/plain', ''), JSON_ONLY)).toBeNull();
    expect(contentTypeError(req(undefined, ''), JSON_ONLY)).toBeNull();
  });

  it('refuses other media types with 415 and go-openapi words, malformed ones with 400', () => {
    const e = contentTypeError(req('text/plain;charset=UTF-8'), JSON_ONLY)!;
    expect([e.status, e.code]).toEqual([415, 'UNSUPPORTED_MEDIA']);
    expect((e.cause as { message: string }).message).toBe(
      'unsupported media type "text/plain", only [application/json] are allowed',
    );
    expect(contentTypeError(req(undefined), JSON_ONLY)!.status).toBe(415);
    const bad = contentTypeError(req('nonsense'), JSON_ONLY)!;
    expect([bad.status, bad.code, bad.message]).toEqual([
      400,
      'INVALID_CONTENT_TYPE',
      'The content type supplied is not acceptable: nonsense',
    ]);
  });

  it('accepts what the operation declares (e.g. PEM for enrollment)', () => {
    const pem = ['application/x-pem-file', 'text/plain'];
    expect(contentTypeError(req('application/x-pem-file'), pem)).toBeNull();
    expect(contentTypeError(req('text/plain'), pem)).toBeNull();
    expect(contentTypeError(req('application/json'), pem)!.status).toBe(415);
    expect(contentTypeError(req('image/png'), ['*/*'])).toBeNull();
  });
});
