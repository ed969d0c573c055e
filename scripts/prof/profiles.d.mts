/** Types of profiles.mjs (for bench/apply.ts, which loads it at run time). */

/** A node of V8's sampling heap profile (`HeapProfiler.SamplingHeapProfileNode`), as far as these helpers read it. */
export interface AllocationNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocationNode[];
}

export interface AllocationProfile {
  head: AllocationNode;
}

export interface HeapSampler {
  start(): Promise<void>;
  stop(): Promise<AllocationProfile>;
  close(): void;
}

export function heapSampler(samplingInterval_bytes: number): HeapSampler;
export function allocationSampler(): { start(): void; stop(): void };
export function readProfile(file: string): any;
export const short: (url: string) => string;
export const label: (cf: { functionName: string; url: string; lineNumber: number }) => string;
export const add: <K>(map: Map<K, number>, key: K, v: number) => Map<K, number>;
export const largest: <K>(map: Map<K, number>, n: number) => Array<[K, number]>;
export function walkAllocations<S>(
  head: AllocationNode,
  state: S,
  visit: (node: AllocationNode, state: S) => S,
): number;
export const sampledBytes: (profile: AllocationProfile) => number;
