/** Keel's own version, reported as `version` by GET /version. */
export const KEEL_VERSION = 'v0.1.0';
export const KEEL_REVISION = process.env.KEEL_REVISION ?? 'unknown';
export const KEEL_BUILD_DATE = process.env.KEEL_BUILD_DATE ?? '2026-11-25 00:00:00';
/** The edge API version this controller speaks (the copied specs' `info.version`). */
export const EDGE_API_VERSION = '0.29.0';
