// Request content types, as go-openapi's runtime checks them for OpenZiti (middleware/validation.go
// contentType): only a request that carries a body is checked; a missing or empty Content-Type counts as
// `application/octet-stream`; parameters (`; charset=utf-8`) are ignored and the media type matches
// case-insensitively.
import { type ApiError, Errors, invalidContentType } from './errors.js';
import type { HttpRequest } from './types.js';

export const JSON_MEDIA_TYPE = 'application/json';
/** What go-openapi assumes when a request with a body names no content type. */
export const DEFAULT_MEDIA_TYPE = 'application/octet-stream';

/** `type/subtype` tokens (RFC 7231 §3.1.1.1), already lower-cased. */
const MEDIA_TYPE = /^[a-z0-9!#$%&'*+.^_`|~-]+\/[a-z0-9!#$%&'*+.^_`|~-]+$/;

/** The media type of a Content-Type value, lower-cased, without parameters; null when malformed. */
export function mediaTypeOf(contentType: string | undefined): string | null {
  const raw = contentType ?? '';
  const semicolon = raw.indexOf(';');
  const type = (semicolon === -1 ? raw : raw.slice(0, semicolon)).trim().toLowerCase();
  if (type === '') return raw.trim() === '' ? DEFAULT_MEDIA_TYPE : null;
  return MEDIA_TYPE.test(type) ? type : null;
}

/**
 * The error for a request whose body is not of an accepted media type, or null when it is acceptable (or has
 * no body). A malformed Content-Type is 400 INVALID_CONTENT_TYPE; a well-formed one that is not accepted is
 * 415 UNSUPPORTED_MEDIA with go-openapi's text as cause. (OpenZiti turns go-openapi's 415 into a 500
 * UNHANDLED; Keel keeps the 415, the status of a client error, with OpenZiti's code for it.)
 */
export function contentTypeError(req: HttpRequest, accepted: readonly string[]): ApiError | null {
  if (req.body.length === 0) return null;
  const header = req.headers['content-type'];
  const type = mediaTypeOf(header);
  if (type === null) return invalidContentType(header ?? '');
  for (let i = 0; i < accepted.length; i++) if (accepted[i] === type || accepted[i] === '*/*') return null;
  return Errors.UNSUPPORTED_MEDIA({
    code: 'UNHANDLED',
    message: `unsupported media type "${type}", only [${accepted.join(' ')}] are allowed`,
  });
}
