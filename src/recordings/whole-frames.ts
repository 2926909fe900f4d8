import { open, stat, truncate } from 'node:fs/promises';

/** The length of the frame (or Ogg page) whose header starts at `at`, undefined when no valid header starts there. */
type FrameLength = (buf: Buffer, at: number) => number | undefined;

/** How far back from a part's end its last whole frame is looked for: several of the largest (an Ogg page: 65,307). */
const TAIL_BYTES = 256 * 1024;
/** Frames in a row that make a run of bytes audio frames rather than a sync pattern inside one. */
const CHAIN = 3;

// Bitrates in kbps by [MPEG-1, MPEG-2/2.5] and layer (I, II, III); index 0 (free format) and 15 are not valid.
const MPEG_KBPS = [
  [
    [0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448],
    [0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384],
    [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  ],
  [
    [0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256],
    [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
  ],
];
// Sample rates by the header's version bits (0: MPEG-2.5, 2: MPEG-2, 3: MPEG-1; 1 is reserved).
const MPEG_RATES: Record<number, number[]> = {
  0: [11025, 12000, 8000],
  2: [22050, 24000, 16000],
  3: [44100, 48000, 32000],
};

const mpegAudio: FrameLength = (buf, at) => {
  if (at + 4 > buf.length || buf[at] !== 0xff || (buf[at + 1] & 0xe0) !== 0xe0) return undefined;
  const version = (buf[at + 1] >> 3) & 3;
  const layer = 4 - ((buf[at + 1] >> 1) & 3); // 1, 2 or 3; 4 is reserved
  const rate = MPEG_RATES[version]?.[(buf[at + 2] >> 2) & 3];
  const kbps = layer < 4 ? MPEG_KBPS[version === 3 ? 0 : 1][layer - 1][buf[at + 2] >> 4] : undefined;
  if (!rate || !kbps) return undefined;
  const padding = (buf[at + 2] >> 1) & 1;
  if (layer === 1) return (Math.floor((12_000 * kbps) / rate) + padding) * 4;
  const perKbps = layer === 3 && version !== 3 ? 72_000 : 144_000;
  return Math.floor((perKbps * kbps) / rate) + padding;
};

const adts: FrameLength = (buf, at) => {
  if (at + 7 > buf.length || buf[at] !== 0xff || (buf[at + 1] & 0xf6) !== 0xf0) return undefined;
  const length = ((buf[at + 3] & 3) << 11) | (buf[at + 4] << 3) | (buf[at + 5] >> 5);
  return length >= 7 ? length : undefined;
};

/** An Ogg page whose last packet goes on in the next page is not a place to cut: its packet would be torn. */
const endsPacket = (buf: Buffer, at: number) =>
  buf.toString('latin1', at, at + 4) !== 'OggS' || buf[at + 26 + buf[at + 26]] !== 255;

const oggPage: FrameLength = (buf, at) => {
  if (at + 27 > buf.length || buf.toString('latin1', at, at + 4) !== 'OggS' || buf[at + 4] !== 0) return undefined;
  const segments = buf[at + 26];
  if (at + 27 + segments > buf.length) return undefined;
  let body = 0;
  for (let i = 0; i < segments; i++) body += buf[at + 27 + i];
  return 27 + segments + body;
};

const BY_EXTENSION: Record<string, FrameLength> = { mp3: mpegAudio, aac: adts, ogg: oggPage };

/**
 * Where the last whole frame within the first `bytes` of a recorded file ends. A capture cut off (its host lost, its
 * size taken while it wrote) can end inside a frame; joined to the next host's part, that torn frame reads as a
 * broken header, and decoders jump their clock there. A file of a format not known here is kept whole.
 */
export async function wholeFramesEnd(file: string, bytes: number, extension: string): Promise<number> {
  const frameLength = BY_EXTENSION[extension];
  if (!frameLength || bytes <= 0) return bytes;
  const start = Math.max(0, bytes - TAIL_BYTES);
  const tail = Buffer.alloc(bytes - start);
  const handle = await open(file, 'r');
  try {
    await handle.read(tail, 0, tail.length, start);
  } finally {
    await handle.close();
  }
  const end = lastFrameEnd(tail, frameLength);
  return end === undefined ? bytes : start + end;
}

/** The end of the last whole frame of `buf`, walking frames from the first run of CHAIN of them. */
function lastFrameEnd(buf: Buffer, frameLength: FrameLength): number | undefined {
  let at = firstChain(buf, frameLength, 0);
  if (at === undefined) return undefined;
  let end = at;
  while (at < buf.length) {
    const length = frameLength(buf, at);
    if (length !== undefined && at + length > buf.length) return end;
    if (length === undefined) {
      // Not a frame where the last one ended: bytes lost inside the part. Frames found again are walked on.
      const again = firstChain(buf, frameLength, at + 1);
      if (again === undefined) return end;
      at = again;
      continue;
    }
    const ends = endsPacket(buf, at);
    at += length;
    if (ends) end = at;
  }
  return end;
}

/**
 * The first offset from `from` where CHAIN frames follow one another, or frames follow one another to the end of
 * `buf` (the last one whole, or torn by the cut).
 */
function firstChain(buf: Buffer, frameLength: FrameLength, from: number): number | undefined {
  for (let at = from; at < buf.length; at++) {
    let next = at;
    for (let frames = 0; frames < CHAIN; frames++) {
      const length = frameLength(buf, next);
      if (length === undefined) break;
      next += length;
      if (next >= buf.length || frames === CHAIN - 1) return at;
    }
  }
  return undefined;
}

/** Cuts a file that ends inside a frame back to its last whole frame, so that what is appended next decodes. */
export async function cutTornFrame(file: string, extension: string): Promise<void> {
  const size = await stat(file).then(
    (s) => s.size,
    () => 0,
  );
  const end = await wholeFramesEnd(file, size, extension);
  if (end < size) await truncate(file, end);
}
