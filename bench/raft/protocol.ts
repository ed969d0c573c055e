/** IPC between the benchmark parent and its Raft node processes. */
import type { LoadResult } from './stats.js';

export interface StartCommand {
  cmd: 'start';
  id: string;
  dir: string;
  port: number;
  clusterId: string;
  peers: Record<string, string>;
  voters: string[];
  tick_ms: number;
}

export interface LoadCommand {
  cmd: 'load';
  concurrency: number;
  payload_bytes: number;
  warmup_ms: number;
  duration_ms: number;
}

export interface StopCommand {
  cmd: 'stop';
}

export type ParentCommand = StartCommand | LoadCommand | StopCommand;

export type ChildEvent =
  | { type: 'ready'; id: string }
  | { type: 'leader'; id: string; leader: string | null; term: number }
  | { type: 'load'; id: string; result: LoadResult; applied: number }
  | { type: 'stopped'; id: string }
  | { type: 'error'; id: string; message: string };
