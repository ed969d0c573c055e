/** Reads the QR code in a PNG written by src/util/qr.ts (8-bit greyscale, no filters), with jsQR. */
import { inflateSync } from 'node:zlib';
import jsqrModule from 'jsqr';

// a CommonJS module whose typings declare an ES default export
const jsQR = ((jsqrModule as unknown as { default?: typeof jsqrModule }).default ?? jsqrModule) as unknown as (
  data: Uint8ClampedArray,
  width: number,
  height: number,
) => { data: string } | null;

/** Decodes the PNGs qrPng writes (8-bit greyscale, filter 0) into RGBA for jsQR. */
function pngToRgba(png: Buffer): { data: Uint8ClampedArray; width: number; height: number } {
  if (!png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])))
    throw new Error('not a PNG');
  let off = 8;
  let width = 0;
  let height = 0;
  const idat: Buffer[] = [];
  while (off < png.length) {
    const len = png.readUInt32BE(off);
    const type = png.toString('latin1', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      if (data[8] !== 8 || data[9] !== 0) throw new Error('not 8-bit greyscale');
    }
    if (type === 'IDAT') idat.push(data);
    off += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const out = new Uint8ClampedArray(width * height * 4);
  for (let y = 0; y < height; y++) {
    if (raw[y * (width + 1)] !== 0) throw new Error('filtered row');
    for (let x = 0; x < width; x++) {
      const v = raw[y * (width + 1) + 1 + x]!;
      out.set([v, v, v, 255], (y * width + x) * 4);
    }
  }
  return { data: out, width, height };
}

/** The text of the QR code in `png`, or null when none is found. */
export function readQrPng(png: Buffer): string | null {
  const { data, width, height } = pngToRgba(png);
  return jsQR(data, width, height)?.data ?? null;
}
