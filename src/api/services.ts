import type { Proposer } from '../../storage/local-proposer.js';
import { OverloadedError } from '../../storage/local-proposer.js';
import type { Store } from '../../storage/store.js';
import { type Command, type Row, StoreFailedError } from '../../storage/types.js';
import type { SessionService } from '../auth/sessions.js';
import type { EntityName } from '../model/index.js';
import { Errors, notFound, storeError, storeFailed } from './errors.js';

export interface Clock {
  now(): number;
}

export type Logger = (level: 'info' | 'warn' | 'error' | 'fatal', msg: string, extra?: Record<string, unknown>) => void;

export const systemClock: Clock = { now: () => Date.now() };

export interface ControllerConfig {
  /** An API session expires after this long without a request. */
  sessionTimeout_ms: number;
  /** Addresses clients use to reach this controller's APIs, e.g. `https://ctrl.example.com:1280`. */
  apiBaseUrls: string[];
  /** Random per-process id reported in the `ziti-instance-id` header. */
  instanceId: string;
  /** `HA_CONTROLLER` is reported when running as a Raft cluster. */
  clustered: boolean;
}

/**
 * What operation handlers use: reads from the local store, writes through the proposer (and only through it),
 * the clock, the configuration and the session service.
 */
export class Services {
  sessions!: SessionService;

  constructor(
    readonly store: Store,
    private readonly proposer: Proposer,
    readonly config: ControllerConfig,
    readonly clock: Clock = systemClock,
    readonly log: Logger = () => {},
  ) {}

  nowIso(): string {
    return new Date(this.clock.now()).toISOString();
  }

  get(entity: EntityName, id: string): Row | undefined {
    return this.store.get(entity, id);
  }

  /** The row or 404 NOT_FOUND, worded as OpenZiti does. */
  require(entity: EntityName, id: string): Row {
    const row = this.store.get(entity, id);
    if (!row) throw notFound(this.store.schema.def(entity).type, id);
    return row;
  }

  /** Proposes a command and waits until it is durable and applied; a recorded failure becomes its HTTP error. */
  async write(cmd: Command): Promise<unknown> {
    let result: Awaited<ReturnType<Proposer['propose']>>;
    try {
      result = await this.proposer.propose(cmd);
    } catch (err) {
      if (err instanceof OverloadedError) throw Errors.SERVER_TOO_MANY_REQUESTS();
      // not acknowledged: the write may or may not be on disk, and nothing more will be (the node is stopping)
      if (err instanceof StoreFailedError) throw storeFailed();
      throw err;
    }
    if (!result.ok) {
      // the input boundary should have made every string well-formed and bounded the nesting: say it did not
      if (result.error.code === 'UNSTORABLE')
        this.log('warn', 'command refused: it would not read back as written', {
          entity: result.error.entity,
          field: result.error.field,
          reason: result.error.reason,
        });
      const apiError = storeError(result.error);
      // an invariant or an internal key collision: the details go to the log only
      if (apiError.code === 'UNHANDLED') this.log('error', 'command rejected by the store', { error: result.error });
      throw apiError;
    }
    return result.value;
  }
}
