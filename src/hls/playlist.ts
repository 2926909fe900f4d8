import { MEDIA_PLAYLIST } from './rendition.js';

/** Segments a player fetches from its first playlist: hls.js, Safari and ffmpeg start three target durations back. */
export const LIVE_START_SEGMENTS = 3;

/** A segment as our segmenter writes it (seg<N>.ts) and as listeners fetch it (seg<N>-<tag>.ts). */
const WRITTEN = /^seg(\d{1,12})\.ts$/;
const PUBLISHED = /^seg(\d{1,12})-([A-Za-z0-9_-]{12})\.ts$/;

/**
 * The multivariant playlist of a session: its one media playlist, with the session's token, beside it or at `base`
 * (nginx's directory of the service, ending in /, where nginx answers the playlists).
 */
export function masterPlaylist(token: string, bitrateKbps: number, base = ''): string {
  const kbps = Math.max(32, Math.min(256, bitrateKbps));
  return [
    '#EXTM3U',
    '#EXT-X-VERSION:3',
    '#EXT-X-INDEPENDENT-SEGMENTS',
    `#EXT-X-STREAM-INF:BANDWIDTH=${kbps * 1100},CODECS="mp4a.40.2"`,
    `${base}${MEDIA_PLAYLIST}?session=${token}`,
    '',
  ].join('\n');
}

/** The segment numbers a media playlist lists, in order. */
export function segmentNumbers(playlist: string): number[] {
  const numbers: number[] = [];
  for (const line of playlist.split('\n')) {
    const n = WRITTEN.exec(line)?.[1];
    if (n) numbers.push(Number(n));
  }
  return numbers;
}

/**
 * The playlist with each segment under its published name (the same for every listener), after `base` (the file
 * server's address of the rendition's directory, ending in /; empty: beside the playlist).
 */
export function publish(playlist: string, tags: Map<number, string>, base = ''): string {
  return playlist
    .split('\n')
    .map((line) => {
      const n = WRITTEN.exec(line)?.[1];
      return n ? `${base}seg${n}-${tags.get(Number(n))}.ts` : line;
    })
    .join('\n');
}

/** A published segment name's number and tag, or undefined when it is not one. */
export function parsePublished(name: string): { number: number; tag: string } | undefined {
  const m = PUBLISHED.exec(name);
  return m ? { number: Number(m[1]), tag: m[2] } : undefined;
}

/**
 * The segments a session fetches from this playlist: the last LIVE_START_SEGMENTS on its first, then each one newer
 * than the newest it was shown. Bytes are counted from these (segment URLs are shared: the playlist is the only
 * request that names the session).
 */
export function newForSession(numbers: number[], newestShown: number | undefined): number[] {
  if (newestShown === undefined) return numbers.slice(-LIVE_START_SEGMENTS);
  return numbers.filter((n) => n > newestShown);
}
