import { crc32, deflateSync } from 'node:zlib';

/**
 * The service's own icon, drawn here (no binary in the repository): a blue disc with a play sign. It is the favicon
 * (PNG, and inside /favicon.ico) and the artwork of a station whose owner set none, so a link preview always has
 * an image.
 */
const ACCENT = [0x25, 0x63, 0xeb];
const SAMPLES = 3; // per side of a pixel: smooth edges

/** How much of the point (x, y) in a unit square is covered: 1 white (the play sign), 2 the disc, 0 none. */
function shapeAt(x: number, y: number): 0 | 1 | 2 {
  const dx = x - 0.5;
  const dy = y - 0.5;
  if (dx * dx + dy * dy > 0.25) return 0;
  // The play sign: a triangle pointing right, centred on its centroid.
  const inTriangle = x >= 0.38 && x <= 0.7 && Math.abs(dy) <= ((0.7 - x) / 0.32) * 0.19;
  return inTriangle ? 1 : 2;
}

function pixels(size: number): Buffer {
  const rows = Buffer.alloc(size * (size * 4 + 1));
  for (let py = 0; py < size; py++) {
    const row = py * (size * 4 + 1); // each row starts with filter type 0
    for (let px = 0; px < size; px++) {
      let white = 0;
      let disc = 0;
      for (let s = 0; s < SAMPLES * SAMPLES; s++) {
        const shape = shapeAt(
          (px + ((s % SAMPLES) + 0.5) / SAMPLES) / size,
          (py + (Math.floor(s / SAMPLES) + 0.5) / SAMPLES) / size,
        );
        if (shape === 1) white++;
        else if (shape === 2) disc++;
      }
      const covered = white + disc;
      const at = row + 1 + px * 4;
      for (let c = 0; c < 3; c++) rows[at + c] = covered ? Math.round((white * 255 + disc * ACCENT[c]) / covered) : 0;
      rows[at + 3] = Math.round((covered * 255) / (SAMPLES * SAMPLES));
    }
  }
  return rows;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** The icon as a PNG of size × size pixels (8-bit RGBA). */
export function stationIconPng(size: number): Buffer {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(size, 0);
  header.writeUInt32BE(size, 4);
  header.set([8, 6, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels(size))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A .ico holding one PNG image (as browsers have read them since Windows Vista). */
export function icoOf(png: Buffer, size: number): Buffer {
  const head = Buffer.alloc(22);
  head.writeUInt16LE(0, 0);
  head.writeUInt16LE(1, 2); // an icon
  head.writeUInt16LE(1, 4); // one image
  head.writeUInt8(size >= 256 ? 0 : size, 6);
  head.writeUInt8(size >= 256 ? 0 : size, 7);
  head.writeUInt16LE(1, 10); // colour planes
  head.writeUInt16LE(32, 12); // bits per pixel
  head.writeUInt32LE(png.length, 14);
  head.writeUInt32LE(22, 18);
  return Buffer.concat([head, png]);
}

let drawn: { favicon: Buffer; ico: Buffer; artwork: Buffer } | undefined;

/** The icons, drawn on first use (tens of milliseconds). */
export function stationIcons(): { favicon: Buffer; ico: Buffer; artwork: Buffer } {
  if (!drawn) {
    const favicon = stationIconPng(32);
    drawn = { favicon, ico: icoOf(favicon, 32), artwork: stationIconPng(256) };
  }
  return drawn;
}
