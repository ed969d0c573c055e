import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { extraNodeFlags, KEEL_BIN, NODE_HEAP_FLAGS, nodeCommand, nodeFlags } from '../../src/cluster/processes.js';

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

describe('heap sizing', () => {
  it('every node started here gets it first, so that KEEL_NODE_FLAGS can override it', () => {
    expect(NODE_HEAP_FLAGS).toEqual([
      '--initial-old-space-size=256',
      '--max-semi-space-size=32',
      '--min-semi-space-size=32',
    ]);
    expect(nodeFlags({})).toEqual([...NODE_HEAP_FLAGS]);
    expect(nodeFlags({ KEEL_NODE_FLAGS: '--initial-old-space-size=64' })).toEqual([
      ...NODE_HEAP_FLAGS,
      '--initial-old-space-size=64',
    ]);
    // what startNode runs: the flags, the binary, its arguments
    const spec = { id: 'n1', dataDir: '/tmp/n1', apiPort: 0, peerPort: 0 };
    const argv = nodeCommand(spec, { KEEL_NODE_FLAGS: '--cpu-prof' });
    const n = NODE_HEAP_FLAGS.length;
    expect(argv.slice(0, n + 2)).toEqual([...NODE_HEAP_FLAGS, '--cpu-prof', KEEL_BIN]);
    expect(argv.slice(n + 2, n + 5)).toEqual(['run', '--node-id', 'n1']);
  });

  it('npm start and the systemd unit start Keel with the same flags', () => {
    const root = new URL('../../', import.meta.url);
    const start = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')).scripts.start as string;
    expect(start).toBe(`node ${NODE_HEAP_FLAGS.join(' ')} bin/keel.js run --data-dir ./data`);
    const unit = readFileSync(new URL('deploy/keel.service', root), 'utf8');
    expect(unit).toContain(`ExecStart=/usr/bin/node ${NODE_HEAP_FLAGS.join(' ')} /opt/keel/bin/keel.js run`);
  });
});
