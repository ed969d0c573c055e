/**
 * Database operations (management, admins; docs/operations.md): a snapshot of the store to a file in the data
 * directory, and the data integrity check (storage/integrity.ts), run in the background with its results polled.
 * Both act on the node that takes the request: on a cluster, each member has its own store, files and results.
 */
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { dataEnvelope } from '../../http/errors.js';
import { checkIntegrity, type IntegrityFinding } from '../../storage/integrity.js';
import { Errors } from '../api/errors.js';
import { type OpDef, op } from '../api/op.js';
import { okEmpty } from '../api/respond.js';
import type { Services } from '../api/services.js';
import { detailEnvelope, empty } from '../model/common.js';
import { s } from '../schema/s.js';
import { writeFileDurably } from '../util/durable-file.js';

/** Results kept from one check, as OpenZiti keeps them; beyond, `tooManyErrors`. */
export const MAX_INTEGRITY_RESULTS = 1000;
/** At most one snapshot per this interval (OpenZiti refuses snapshots that come too often, 429 RATE_LIMITED). */
export const SNAPSHOT_MIN_INTERVAL_MS = 60_000;
/** Snapshot files kept in `<dataDir>/snapshots`: the oldest beyond this are removed. */
export const MAX_SNAPSHOT_FILES = 10;
export const SNAPSHOT_DIR = 'snapshots';
const SNAPSHOT_SUFFIX = '.keel-snapshot';
/** Go's zero time: what OpenZiti's results carry (as null) before any check ran. */
const GO_ZERO_TIME = '0001-01-01T00:00:00.000Z';

const dataIntegrityCheckDetail = s.named(
  'dataIntegrityCheckDetail',
  s.obj({ description: s.str(), fixed: s.bool() }, ['description', 'fixed']),
);
const dataIntegrityCheckDetails = s.named(
  'dataIntegrityCheckDetails',
  s.obj(
    {
      endTime: s.datetime(),
      error: s.str(),
      fixingErrors: s.bool(),
      inProgress: s.bool(),
      results: s.named('dataIntegrityCheckDetailList', s.arr(dataIntegrityCheckDetail)),
      startTime: s.datetime(),
      tooManyErrors: s.bool(),
    },
    ['inProgress', 'fixingErrors', 'tooManyErrors', 'startTime', 'endTime', 'error', 'results'],
  ),
);

/** The integrity check of this node: one at a time, its latest results kept in memory. */
interface CheckState {
  running: boolean;
  fixingErrors: boolean;
  startTime: string;
  endTime: string;
  error: string;
  results: IntegrityFinding[];
  tooManyErrors: boolean;
}

/** Writes the store's snapshot to `<dataDir>/snapshots/<time>.keel-snapshot` (durably: writeFileDurably). */
async function writeSnapshot(svc: Services): Promise<string> {
  const dataDir = svc.config.dataDir;
  if (dataDir === undefined) throw Errors.UNHANDLED();
  // read in one synchronous step (the store may not change while its chunks are read), then written
  const chunks = [...svc.store.snapshotChunks()];
  const dir = join(dataDir, SNAPSHOT_DIR);
  await mkdir(dir, { recursive: true });
  const name = `${new Date(svc.clock.now()).toISOString().replace(/[:.]/g, '-')}${SNAPSHOT_SUFFIX}`;
  await writeFileDurably(join(dir, name), chunks);
  const kept = (await readdir(dir)).filter((f) => f.endsWith(SNAPSHOT_SUFFIX)).sort();
  for (const old of kept.slice(0, Math.max(0, kept.length - MAX_SNAPSHOT_FILES))) await rm(join(dir, old));
  return name;
}

export function databaseOps(): OpDef<unknown>[] {
  const check: CheckState = {
    running: false,
    fixingErrors: false,
    startTime: GO_ZERO_TIME,
    endTime: GO_ZERO_TIME,
    error: '',
    results: [],
    tooManyErrors: false,
  };
  let lastSnapshotAt = Number.NEGATIVE_INFINITY;
  let snapshotting = false;

  const run = (svc: Services, fix: boolean): void => {
    if (check.running) throw Errors.RATE_LIMITED();
    Object.assign(check, {
      running: true,
      fixingErrors: fix,
      startTime: svc.nowIso(),
      endTime: GO_ZERO_TIME,
      error: '',
      results: [],
      tooManyErrors: false,
    });
    void checkIntegrity(svc.store, { fix, maxFindings: MAX_INTEGRITY_RESULTS })
      .then(
        (report) => {
          check.results = report.findings;
          check.tooManyErrors = report.tooManyErrors;
          for (const f of report.findings) svc.log('warn', 'data integrity error', { ...f });
        },
        (err: unknown) => {
          check.error = String((err as Error)?.message ?? err);
          svc.log('error', 'data integrity check failed', { err: check.error });
        },
      )
      .finally(() => {
        check.endTime = svc.nowIso();
        check.running = false;
      });
  };

  const integrity = (path: string, operationId: string, fix: boolean) =>
    op({
      method: 'POST',
      path,
      apis: ['management'],
      operationId,
      tags: ['Database'],
      summary: fix
        ? 'Runs a data integrity scan and attempts to fix any issues it can'
        : 'Starts a data integrity scan',
      description:
        'Starts the check on this node in the background (202); results at GET /database/data-integrity-results. ' +
        '429 while one is running.',
      access: 'admin',
      responses: { 202: { description: 'Base empty response', schema: empty } },
      handler: ({ svc }) => {
        run(svc, fix);
        return dataEnvelope({}, {}, 202);
      },
    });

  return [
    op({
      method: 'POST',
      path: '/database/snapshot',
      apis: ['management'],
      operationId: 'createDatabaseSnapshot',
      tags: ['Database'],
      summary: 'Create a new database snapshot',
      description: `Writes this node's store to a file under <data dir>/${SNAPSHOT_DIR}; at most one a minute.`,
      access: 'admin',
      responses: { 200: { description: 'Base empty response', schema: empty } },
      handler: async ({ svc }) => {
        const now = svc.clock.now();
        if (snapshotting || now - lastSnapshotAt < SNAPSHOT_MIN_INTERVAL_MS) throw Errors.RATE_LIMITED();
        snapshotting = true;
        lastSnapshotAt = now;
        try {
          const name = await writeSnapshot(svc);
          svc.log('info', 'database snapshot written', { file: name, index: svc.store.appliedIndex });
        } catch (err) {
          lastSnapshotAt = Number.NEGATIVE_INFINITY;
          throw err;
        } finally {
          snapshotting = false;
        }
        return okEmpty();
      },
    }),
    integrity('/database/check-data-integrity', 'checkDataIntegrity', false),
    integrity('/database/fix-data-integrity', 'fixDataIntegrity', true),
    op({
      method: 'GET',
      path: '/database/data-integrity-results',
      apis: ['management'],
      operationId: 'dataIntegrityResults',
      tags: ['Database'],
      summary: 'Returns any results found from in-progress integrity checks',
      description: "The state and findings of this node's latest data integrity check.",
      access: 'admin',
      responses: {
        200: {
          description: 'A list of data integrity issues found',
          schema: detailEnvelope('dataIntegrityCheckResultEnvelope', dataIntegrityCheckDetails),
        },
      },
      handler: () =>
        dataEnvelope(
          {
            endTime: check.endTime,
            error: check.error,
            fixingErrors: check.fixingErrors,
            inProgress: check.running,
            results: check.results,
            startTime: check.startTime,
            tooManyErrors: check.tooManyErrors,
          },
          {
            pagination: { limit: -1, offset: 0, totalCount: check.results.length },
            filterableFields: [],
          },
        ),
    }),
  ];
}
