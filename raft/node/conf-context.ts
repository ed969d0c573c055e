/** The application context the node attaches to conf changes: the transport addresses of added members. */
import { Packr } from 'msgpackr';

const packr = new Packr({ useRecords: false });

export function encodeAddresses(addresses: Record<string, string>): Uint8Array {
  return packr.pack({ addresses });
}

export function decodeAddresses(context: Uint8Array | undefined): Record<string, string> {
  if (context === undefined || context.byteLength === 0) return {};
  try {
    const v = packr.unpack(context) as { addresses?: unknown };
    const out: Record<string, string> = {};
    if (typeof v.addresses === 'object' && v.addresses !== null) {
      for (const [k, a] of Object.entries(v.addresses)) if (typeof a === 'string') out[k] = a;
    }
    return out;
  } catch {
    return {};
  }
}
