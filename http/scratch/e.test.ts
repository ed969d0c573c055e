import net from 'node:net';
import { it } from 'vitest';
import { createApp, dataEnvelope, Router, serve } from '../index.js';

const router = new Router();
router.add('POST', '/x', (req) => dataEnvelope({ n: req.body.length }));
router.add('GET', '/x', () => dataEnvelope({ n: 1 }));
function raw(port: number, text: string, wait: number): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    const t0 = Date.now();
    const t = setTimeout(() => {
      s.destroy();
      resolve(`${out.replace(/\r\n/g, ' | ').slice(0, 120)} [timeout]`);
    }, wait);
    s.on('data', (d) => {
      out += d;
    });
    s.on('error', (e) => {
      clearTimeout(t);
      resolve(`${out.slice(0, 120)} [${(e as any).code} after ${Date.now() - t0}]`);
    });
    s.on('close', () => {
      clearTimeout(t);
      resolve(`${out.replace(/\r\n/g, ' | ').slice(0, 120)} [closed after ${Date.now() - t0}ms]`);
    });
    s.write(text);
  });
}
it('e', async () => {
  for (const engine of ['uws', 'node'] as const) {
    const srv = await serve(createApp({ router }), { engine, host: '127.0.0.1', port: 0 });
    const res = await Promise.all([
      raw(srv.port, 'POST /x HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 2000000\r\n\r\n', 2500),
      raw(srv.port, 'POST /x HTTP/1.1\r\nhost: a\r\nexpect: 100-continue\r\ncontent-length: 2\r\n\r\n', 2500),
      raw(srv.port, 'GET /x HTTP/1.0\r\n\r\n', 14000),
      raw(srv.port, 'GET /x HTTP/1.1\r\nhost: a\r\n', 14000),
    ]);
    for (const r of res) console.log(engine, r);
    await srv.close();
  }
}, 60000);
