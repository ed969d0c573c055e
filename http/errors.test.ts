import { describe, expect, it } from 'vitest';
import {
  ApiError,
  dataEnvelope,
  ERROR_DEFINITIONS,
  Errors,
  errorEnvelope,
  errorResponse,
  fieldError,
  goValueString,
  invalidContentType,
  invalidUuid,
} from './errors.js';

const META = '"meta":{"apiEnrollmentVersion":"0.0.1","apiVersion":"0.0.1"}';

describe('error factories', () => {
  it('carry the exact OpenZiti status and message per code', () => {
    const samples: [keyof typeof Errors, number, string][] = [
      ['NOT_FOUND', 404, 'The resource requested was not found or is no longer available'],
      ['UNHANDLED', 500, 'An unhandled error occurred'],
      ['METHOD_NOT_ALLOWED', 405, 'The resource requested does not support this HTTP verb'],
      ['REQUEST_ENTITY_TOO_LARGE', 413, 'The request body exceeds the maximum accepted size'],
      ['TIMEOUT', 503, 'The requested operation took too much time to reply'],
      ['COULD_NOT_PARSE_BODY', 400, 'The body of the request could not be parsed'],
      [
        'UNAUTHORIZED',
        401,
        'The request could not be completed. The session is not authorized or the credentials are invalid',
      ],
      ['INVALID_ENROLLMENT_ALREADY_ENROLLED', 410, 'The token provided has already been used to enroll'],
      ['CLUSTER_NO_LEADER', 503, 'Cluster has no leader, unable to make model updates.'],
      ['UNSUPPORTED_MEDIA', 415, 'UNSUPPORTED_MEDIA'],
    ];
    for (const [code, status, message] of samples) {
      const err = Errors[code]();
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toBeInstanceOf(Error);
      expect(err.code).toBe(code);
      expect(err.status).toBe(status);
      expect(err.message).toBe(message);
    }
  });

  it('exist for every defined code and produce valid error statuses', () => {
    const codes = Object.keys(ERROR_DEFINITIONS) as (keyof typeof Errors)[];
    expect(codes.length).toBeGreaterThan(60);
    for (const code of codes) {
      const err = Errors[code]();
      expect(err.status).toBeGreaterThanOrEqual(400);
      expect(err.status).toBeLessThan(600);
      expect(err.message.length).toBeGreaterThan(0);
    }
  });

  it('rejects a non-error status', () => {
    expect(() => new ApiError('X', 200, 'ok')).toThrow(RangeError);
    expect(() => new ApiError('', 400, 'x')).toThrow(TypeError);
  });

  it('appends the content type for INVALID_CONTENT_TYPE', () => {
    const err = invalidContentType('text/plain');
    expect(err.status).toBe(400);
    expect(err.message).toBe('The content type supplied is not acceptable: text/plain');
  });

  it('withHeaders copies the error and merges headers', () => {
    const base = Errors.UNAUTHORIZED();
    const withAuth = base.withHeaders({ 'www-authenticate': 'zt-session realm="zt-session"' });
    expect(base.headers).toBeUndefined();
    expect(withAuth.headers).toEqual({ 'www-authenticate': 'zt-session realm="zt-session"' });
    expect(withAuth.code).toBe('UNAUTHORIZED');
  });
});

describe('errorEnvelope', () => {
  it('matches the wire shape of a storage NOT_FOUND exactly', () => {
    const err = Errors.NOT_FOUND({ code: 'UNHANDLED', message: 'identity with id abc not found' });
    expect(errorEnvelope(err, 'Xk3.9aZ1Q')).toBe(
      '{"error":{"cause":{"code":"UNHANDLED","message":"identity with id abc not found"},"code":"NOT_FOUND",' +
        '"message":"The resource requested was not found or is no longer available","requestId":"Xk3.9aZ1Q"},' +
        `${META}}`,
    );
  });

  it('omits the cause when there is none', () => {
    expect(errorEnvelope(Errors.TIMEOUT(), 'r1')).toBe(
      `{"error":{"code":"TIMEOUT","message":"The requested operation took too much time to reply","requestId":"r1"},${META}}`,
    );
  });

  it('rewrites INVALID_FIELD with a field cause to COULD_NOT_VALIDATE', () => {
    const body = JSON.parse(errorEnvelope(fieldError('name', 'must be unique', 'dup'), 'r2'));
    expect(body.error).toEqual({
      cause: { field: 'name', reason: 'must be unique', value: 'dup' },
      code: 'COULD_NOT_VALIDATE',
      message: 'The supplied request contains an invalid document or no valid accept content were available, see cause',
      requestId: 'r2',
    });
  });

  it('keeps the code of other errors with a field cause and prints values like Go %v', () => {
    const err = Errors.INVALID_PAGINATION({
      field: 'limit',
      reason: 'could not parse limit, value is not an integer',
      value: ['a', 1],
    });
    const body = JSON.parse(errorEnvelope(err, 'r3'));
    expect(body.error.code).toBe('INVALID_PAGINATION');
    expect(body.error.cause).toEqual({
      field: 'limit',
      reason: 'could not parse limit, value is not an integer',
      value: '[a 1]',
    });
  });

  it('drops an empty field value (omitempty)', () => {
    const body = JSON.parse(errorEnvelope(fieldError('name', 'is required', ''), 'r'));
    expect(body.error.cause).toEqual({ field: 'name', reason: 'is required' });
  });

  it('nests an ApiError cause with the same request id', () => {
    const inner = Errors.INVALID_AUTH();
    const outer = Errors.UNAUTHORIZED(inner);
    const text = errorEnvelope(outer, 'rid');
    expect(
      text.startsWith('{"error":{"cause":{"code":"INVALID_AUTH","message":"The authentication request failed",'),
    ).toBe(true);
    const body = JSON.parse(text);
    expect(body.error.cause.requestId).toBe('rid');
    expect(body.error.code).toBe('UNAUTHORIZED');
  });

  it('renders a generic cause as {data, message}', () => {
    const text = errorEnvelope(invalidUuid('nope'), 'r');
    expect(text).toContain('"cause":{"data":{"uuid":"nope"},"message":"invalid uuid"},"code":"INVALID_UUID"');
  });

  it('renders a plain Error cause as UNHANDLED without a stack', () => {
    const err = new Error('boom');
    (err as { code?: string }).code = 'ECONNRESET';
    const body = JSON.parse(errorEnvelope(Errors.COULD_NOT_READ_BODY(err), 'r'));
    expect(body.error.cause).toEqual({ code: 'UNHANDLED', message: 'boom' });
    expect(JSON.stringify(body)).not.toContain('at ');
  });

  it('puts error.data between code and message', () => {
    const err = new ApiError('CUSTOM', 409, 'custom', { data: { k: 1 } });
    expect(errorEnvelope(err, 'r')).toBe(
      `{"error":{"code":"CUSTOM","data":{"k":1},"message":"custom","requestId":"r"},${META}}`,
    );
  });

  it('cuts a cyclic cause chain', () => {
    const a = new ApiError('A', 400, 'a');
    const b = new ApiError('B', 400, 'b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(() => errorEnvelope(b, 'r')).not.toThrow();
  });
});

describe('errorResponse / dataEnvelope', () => {
  it('errorResponse sets status, JSON content type and the error headers', () => {
    const err = Errors.UNAUTHORIZED(undefined, { headers: { 'www-authenticate': 'Bearer realm="openziti-oidc"' } });
    const res = errorResponse(err, 'abc');
    expect(res.status).toBe(401);
    expect(res.headers).toEqual({
      'www-authenticate': 'Bearer realm="openziti-oidc"',
      'content-type': 'application/json',
    });
    expect(JSON.parse(res.body as string).error.requestId).toBe('abc');
  });

  it('dataEnvelope wraps data with an empty meta by default', () => {
    const res = dataEnvelope({ id: 'x' });
    expect(res.status).toBe(200);
    expect(res.headers).toEqual({ 'content-type': 'application/json' });
    expect(res.body).toBe('{"data":{"id":"x"},"meta":{}}');
  });

  it('dataEnvelope takes meta and a status', () => {
    const res = dataEnvelope([1], { pagination: { limit: 10, offset: 0, totalCount: 1 } }, 201);
    expect(res.status).toBe(201);
    expect(res.body).toBe('{"data":[1],"meta":{"pagination":{"limit":10,"offset":0,"totalCount":1}}}');
  });

  it('dataEnvelope refuses undefined data', () => {
    expect(() => dataEnvelope(undefined)).toThrow(TypeError);
  });
});

describe('goValueString', () => {
  it('formats like fmt %v', () => {
    expect(goValueString(null)).toBe('<nil>');
    expect(goValueString(undefined)).toBe('<nil>');
    expect(goValueString(12)).toBe('12');
    expect(goValueString(true)).toBe('true');
    expect(goValueString(['#a', '#b'])).toBe('[#a #b]');
    expect(goValueString({ b: 2, a: 'x' })).toBe('map[a:x b:2]');
  });
});
