/**
 * Preload (for the benchmark's nodes `KEEL_NODE_FLAGS=--import=<abs path>`): counts, per socket, the WebSocket
 * frames sent on it (ws's Sender), the socket writes (each one write or writev; over TLS about one record and one
 * syscall) and the event-loop turns with a write, and writes `<COUNT_DIR or /tmp>/writes-<pid>.txt` at exit for
 * every socket with more than 50 writes. Writes per frame below 1 means frames share writes; writes per turn above 1
 * means one turn's sends left in several writes.
 */
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import { Sender } from 'ws';

const dir = process.env.COUNT_DIR ?? '/tmp';
const frames = new WeakMap();
const sendFrame = Sender.prototype.sendFrame;
Sender.prototype.sendFrame = function (list, cb) {
  frames.set(this._socket, (frames.get(this._socket) ?? 0) + 1);
  return sendFrame.call(this, list, cb);
};

const sockets = [];
const stats = new WeakMap();
let turn = 0;
let turnOpen = false;
const writeGeneric = net.Socket.prototype._writeGeneric;
net.Socket.prototype._writeGeneric = function (writev, data, encoding, cb) {
  if (!turnOpen) {
    turnOpen = true;
    turn++;
    setImmediate(() => {
      turnOpen = false;
    });
  }
  let s = stats.get(this);
  if (s === undefined) {
    s = { socket: this, name: `${this.encrypted ? 'tls' : 'tcp'} local ${this.localPort} remote ${this.remotePort}` };
    Object.assign(s, { writes: 0, turns: 0, last: 0 });
    stats.set(this, s);
    if (sockets.length < 10_000) sockets.push(s);
  }
  s.writes++;
  if (s.last !== turn) {
    s.turns++;
    s.last = turn;
  }
  return writeGeneric.call(this, writev, data, encoding, cb);
};

process.on('exit', () => {
  const rows = sockets
    .filter((s) => s.writes > 50)
    .map((s) => `${s.name}: frames ${frames.get(s.socket) ?? 0} writes ${s.writes} turns ${s.turns}`);
  writeFileSync(`${dir}/writes-${process.pid}.txt`, `${rows.join('\n')}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
