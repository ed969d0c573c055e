/**
 * Benchmark child: a bare node:tls server asking every client for a certificate (as Keel's API listener does with
 * API TLS), with a P-256 server certificate from Keel's PKI module; it completes the handshake and closes. Prints
 * `READY <port>`. The raw mutual-TLS handshake rate that cert logins are compared with (bench/auth.ts).
 */
import { createServer } from 'node:tls';
import { createRootCa, issueServerCert } from '../../src/pki/index.js';

const root = await createRootCa({ commonName: 'bench-tls-root' });
const server = await issueServerCert(root, { commonName: 'localhost', ipAddresses: ['127.0.0.1'] });
const tls = createServer(
  { key: server.keyPem, cert: server.certPem, requestCert: true, rejectUnauthorized: false },
  (socket) => socket.end(),
);
tls.on('tlsClientError', () => {});
tls.listen(0, '127.0.0.1', () => {
  const address = tls.address();
  process.stdout.write(`READY ${typeof address === 'object' && address ? address.port : 0}\n`);
});
process.on('SIGTERM', () => tls.close(() => process.exit(0)));
