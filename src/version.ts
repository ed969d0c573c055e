/** Keel's own version, reported as `version` by GET /version. */
export const KEEL_VERSION = 'v0.1.0';
export const KEEL_REVISION = process.env.KEEL_REVISION ?? 'unknown';
export const KEEL_BUILD_DATE = process.env.KEEL_BUILD_DATE ?? '2026-11-25 00:00:00';
/** The edge API version this controller speaks (the copied specs' `info.version`). */
export const EDGE_API_VERSION = '0.29.0';
/**
 * The state-machine version this build applies: what the commands of the replicated log mean. A release that adds a
 * command, an entity type or a field that commands write, or changes what one does, raises it by one and lists the
 * new kinds in src/cluster/state-machine-version.ts (docs/cluster.md, "Rolling upgrades").
 */
export const STATE_MACHINE_VERSION = 1;
