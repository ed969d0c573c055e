import { encodeChecked, packr, UnstorableError } from './codec.js';
import type { Command, CommandResult } from './types.js';

/** The entity a command's errors name. */
export function commandEntity(cmd: Command): string {
  return 'entity' in cmd ? cmd.entity : cmd.op === 'custom' ? cmd.name : 'batch';
}

/**
 * The path to the part of a command that carries the caller's fields (left out of error fields): `data.` of a
 * create, `set.` of an update, `args.` of a custom command, behind any batch's `ops.<i>.` steps.
 */
const PAYLOAD_PATH = /^(?:ops\.\d+\.)*(?:data|set|args)\./;

export type EncodedCommand = { ok: true; bytes: Uint8Array; cmd: Command } | { ok: false; result: CommandResult };

/**
 * Encodes a command for the log (or, on a single node, for the round trip every command takes): the bytes and the
 * decoded copy that is then applied (decoded on first use), so a single node applies exactly what a cluster's
 * followers would. A command
 * that does not read back as written (storage/codec.ts) fails alone with a recorded UNSTORABLE result.
 */
export function encodeCommand(cmd: Command): EncodedCommand {
  try {
    return new Encoded(encodeChecked(cmd));
  } catch (err) {
    if (!(err instanceof UnstorableError)) throw err;
    // the caller's field: without the command's own path to it (a batch's `ops.<i>.` steps, then `data.`, …)
    const field = err.path.replace(PAYLOAD_PATH, '');
    return {
      ok: false,
      result: { ok: false, error: { code: 'UNSTORABLE', entity: commandEntity(cmd), field, reason: err.reason } },
    };
  }
}

/**
 * An encoded command, decoded when asked for (a single node applies it; a cluster proposes only the bytes). A class,
 * not an object literal with a getter: V8 defines a literal's accessor at run time, on every command (about a
 * microsecond on the path of every write).
 */
class Encoded {
  readonly ok = true;
  private decoded: Command | undefined = undefined;

  constructor(readonly bytes: Uint8Array) {}

  get cmd(): Command {
    this.decoded ??= packr.unpack(this.bytes) as Command;
    return this.decoded;
  }
}
