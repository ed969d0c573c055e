import { describe, expect, it } from 'vitest';
import { extraNodeFlags } from '../../src/cluster/processes.js';

describe('KEEL_NODE_FLAGS', () => {
  it('passes Node flags to every node started, split on spaces', () => {
    expect(extraNodeFlags({})).toEqual([]);
    expect(extraNodeFlags({ KEEL_NODE_FLAGS: ' --cpu-prof  --cpu-prof-dir=/tmp/p ' })).toEqual([
      '--cpu-prof',
      '--cpu-prof-dir=/tmp/p',
    ]);
  });

  it('refuses anything but flags, and more than 16', () => {
    expect(() => extraNodeFlags({ KEEL_NODE_FLAGS: '--a evil.js' })).toThrow(/at most 16 Node flags/);
    expect(() => extraNodeFlags({ KEEL_NODE_FLAGS: Array(17).fill('--x').join(' ') })).toThrow(/at most 16/);
    expect(extraNodeFlags({ KEEL_NODE_FLAGS: Array(16).fill('--x').join(' ') })).toHaveLength(16);
  });
});
