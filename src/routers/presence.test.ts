import { describe, expect, it } from 'vitest';
import { protocolsOf } from './control.js';
import {
  MAX_REMEMBERED_DISCONNECTS,
  RouterPresence,
  SYNC_DISCONNECTED,
  SYNC_DONE,
  SYNC_HELLO_WAIT,
  SYNC_NEW,
} from './presence.js';

const hello = (routerId: string) => ({
  routerId,
  hostname: `${routerId}.example.test`,
  protocols: { tls: `tls:${routerId}.example.test:3022` },
  versionInfo: { version: 'v1', revision: '', buildDate: '', os: '', arch: '' },
  connectedAt_ms: 0,
});

describe('router presence', () => {
  it('new → waiting for the hello → online → disconnected; one connection per router', () => {
    const p = new RouterPresence();
    expect(p.state('r1')).toMatchObject({ isOnline: false, syncStatus: SYNC_NEW, supportedProtocols: {} });
    p.connecting('r1');
    expect(() => p.connecting('r1')).toThrow();
    expect(p.state('r1')).toMatchObject({ isOnline: false, syncStatus: SYNC_HELLO_WAIT });
    p.hello(hello('r1'));
    expect(() => p.hello(hello('r2'))).toThrow(); // no hello without a connection
    expect(p.state('r1')).toMatchObject({ isOnline: true, syncStatus: SYNC_DONE, hostname: 'r1.example.test' });
    expect([...p.onlineRouters()].map((r) => r.routerId)).toEqual(['r1']);
    p.disconnected('r1');
    expect(p.state('r1')).toMatchObject({ isOnline: false, syncStatus: SYNC_DISCONNECTED, hostname: '' });
    p.forget('r1');
    expect(p.state('r1').syncStatus).toBe(SYNC_NEW);
  });

  it(`remembers at most ${MAX_REMEMBERED_DISCONNECTS} gone routers, the oldest forgotten first`, () => {
    const p = new RouterPresence();
    for (let i = 0; i <= MAX_REMEMBERED_DISCONNECTS; i++) {
      p.connecting(`r${i}`);
      p.disconnected(`r${i}`);
    }
    expect(p.state('r0').syncStatus).toBe(SYNC_NEW);
    expect(p.state('r1').syncStatus).toBe(SYNC_DISCONNECTED);
    expect(p.state(`r${MAX_REMEMBERED_DISCONNECTS}`).syncStatus).toBe(SYNC_DISCONNECTED);
  });

  it('listener addresses: <protocol>:<host>:<port>, one per protocol', () => {
    // a protocol named like an inherited property is one like any other
    expect(protocolsOf(['constructor:h.example:1'])).toEqual({ constructor: 'constructor:h.example:1' });
    expect(protocolsOf(['tls:a.example:3022', 'wss:[::1]:443', 'ws:10.0.0.1:80'])).toEqual({
      tls: 'tls:a.example:3022',
      wss: 'wss:[::1]:443',
      ws: 'ws:10.0.0.1:80',
    });
    for (const bad of ['tls:a', 'tls:a:0', 'tls:a:65536', 'TLS:a:1', 'tls::1', 'tls:a b:1', 'tls://a:1']) {
      expect(() => protocolsOf([bad]), bad).toThrow();
    }
    expect(() => protocolsOf(['tls:a:1', 'tls:b:2'])).toThrow();
  });
});
