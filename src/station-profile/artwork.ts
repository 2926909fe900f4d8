import { createHash } from 'node:crypto';
import { ApiError } from '../errors/index.js';
import { type ArtworkType, imageFacts } from './image-facts.js';

/** What a station's artwork may be: small enough for a page and a link preview, large enough to look sharp. */
export const ARTWORK_LIMITS = { maxBytes: 1024 * 1024, minSide: 16, maxSide: 4096 } as const;

const EXTENSIONS: Record<ArtworkType, string> = { 'image/png': 'png', 'image/jpeg': 'jpg', 'image/webp': 'webp' };

/** A checked artwork image and the name it is kept under (from its content: a new image is a new address). */
export interface CheckedArtwork {
  bytes: Buffer;
  type: ArtworkType;
  width: number;
  height: number;
  /** The public name (`{hash}.{ext}`); on disk it is `.artwork-{name}`, which no AutoDJ file name can be. */
  name: string;
}

export const artworkFileOf = (name: string) => `.artwork-${name}`;
export const ARTWORK_NAME = /^[0-9a-f]{32}\.(png|jpg|webp)$/;

/** Checks uploaded bytes as the artwork: the declared type, the header's own type, the size limits. */
export function checkArtwork(bytes: Buffer, declaredType: string): CheckedArtwork {
  const facts = imageFacts(bytes);
  const accepted = Object.keys(EXTENSIONS).join(', ');
  if (!facts) {
    throw new ApiError(
      415,
      'unsupported_image_type',
      `The artwork must be a PNG, JPEG or WebP image (${accepted}); these bytes are none of them.`,
    );
  }
  if (declaredType !== facts.type) {
    throw new ApiError(
      415,
      'image_type_mismatch',
      `The body is ${facts.type} but Content-Type says ${declaredType.slice(0, 60) || 'nothing'}. Send it with Content-Type: ${facts.type}.`,
    );
  }
  const { minSide, maxSide } = ARTWORK_LIMITS;
  if ([facts.width, facts.height].some((side) => side < minSide || side > maxSide)) {
    throw new ApiError(
      422,
      'image_size_out_of_range',
      `The artwork is ${facts.width}×${facts.height} px; each side must be ${minSide} to ${maxSide} px (square, 512 px or more, looks best).`,
    );
  }
  const hash = createHash('sha256').update(bytes).digest('hex').slice(0, 32);
  return { bytes, ...facts, name: `${hash}.${EXTENSIONS[facts.type]}` };
}
