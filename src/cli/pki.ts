/** `keel pki …`: the cluster's PKI on disk (docs/pki.md). */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { x509 } from '../pki/crypto.js';
import { fingerprintOfDer } from '../pki/fingerprint.js';
import { type IssuedNode, initClusterPki, issueNodeBundle, PkiError } from '../pki/index.js';

export const PKI_USAGE = `Usage:
  keel pki init --dir DIR --node-id ID [--host H]...
      creates the cluster root CA, the signing CA and this node's peer certificate in DIR
  keel pki issue-node --ca-dir DIR --node-id ID [--host H]... --out BUNDLE [--without-signing-ca]
      writes a join bundle for a joining node into BUNDLE: its peer key and certificate (signed by the root CA
      of DIR, so DIR must hold the root key: the first member's PKI directory, or the operator's), the root CA
      certificate, and the cluster's signing CA (certificate and key), with which the member signs identity,
      router and its own API certificates; copy BUNDLE to that node's <data-dir>/pki before its first start
      (it holds private keys: use a secure channel)
      --without-signing-ca: no signing CA key in the bundle; it carries an API certificate for the --host
      names instead, and the member cannot enroll identities (docs/pki.md)

  --host H    a DNS name or IP address the node is reached at (repeatable; becomes a SAN of its certificate)
  --validity-days N   validity of the node certificate (default 365)
`;

function describe(issued: IssuedNode): string {
  const cert = new x509.X509Certificate(issued.certPem);
  return [
    `  node id:      ${issued.nodeId}`,
    `  directory:    ${issued.dir}`,
    `  fingerprint:  ${fingerprintOfDer(Buffer.from(cert.rawData))}`,
    `  valid until:  ${cert.notAfter.toISOString()}`,
  ].join('\n');
}

/** Runs `keel pki <sub> …`; returns the exit code. */
export async function pkiMain(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '-h' || sub === '--help' || sub === 'help') {
    process.stdout.write(PKI_USAGE);
    return 0;
  }
  if (sub !== 'init' && sub !== 'issue-node') {
    process.stderr.write(`keel pki: unknown subcommand '${sub}'\n\n${PKI_USAGE}`);
    return 2;
  }
  const { values } = parseArgs({
    args: rest,
    options: {
      dir: { type: 'string' },
      'ca-dir': { type: 'string' },
      out: { type: 'string' },
      'node-id': { type: 'string' },
      host: { type: 'string', multiple: true },
      'validity-days': { type: 'string' },
      'without-signing-ca': { type: 'boolean' },
    },
    strict: true,
  });
  const nodeId = values['node-id'];
  if (!nodeId) throw new Error('--node-id is required');
  const validity_days = values['validity-days'] === undefined ? undefined : Number(values['validity-days']);
  const node = { nodeId, hosts: values.host ?? [], validity_days };
  try {
    if (sub === 'init') {
      if (!values.dir) throw new Error('--dir is required');
      const issued = await initClusterPki(resolve(values.dir), node);
      process.stdout.write(`Cluster PKI created (root CA, signing CA, peer certificate)\n${describe(issued)}\n`);
      return 0;
    }
    if (!values['ca-dir'] || !values.out) throw new Error('--ca-dir and --out are required');
    const issued = await issueNodeBundle(resolve(values['ca-dir']), resolve(values.out), {
      ...node,
      withSigningCa: values['without-signing-ca'] !== true,
    });
    process.stdout.write(`Join bundle written; copy the directory to node '${nodeId}'\n${describe(issued)}\n`);
    return 0;
  } catch (err) {
    if (err instanceof PkiError) {
      process.stderr.write(`keel pki: ${err.code}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
