import { ApiError } from '../errors/index.js';
import { HLS_SEGMENT_SECONDS } from './url.js';

/**
 * A player fetches its media playlist about once a target duration (sooner while the live edge has not moved): a
 * session may fetch it once every PLAYLIST_INTERVAL_MS (four times a player's pace), with a few at once (a start, a
 * retry). Fetched faster, it is told to wait (429); fetched faster again and again, it is shared by several players
 * and is ended for good: a session is one player.
 */
export const PLAYLIST_INTERVAL_MS = (HLS_SEGMENT_SECONDS * 1000) / 4;
export const PLAYLIST_BURST = 3;
/** Refusals for pace, with no full allowance between them, after which a session counts as shared. */
export const SHARED_AFTER_REFUSALS = 3;

/** A session's playlist fetches: how many it may make now, when that was computed, its refusals since it was full. */
export interface PlaylistAllowance {
  allowance: number;
  allowanceAt: number;
  refusals: number;
  /** The last refusal of a fetch nginx found too fast (refuseOverRate). */
  refusedAt?: number;
}

/** Takes one playlist fetch: 'ok', 'wait' (the 429 is tooFast) or 'shared' (the session ends). */
export function takePlaylistFetch(pace: PlaylistAllowance, now = Date.now()): 'ok' | 'wait' | 'shared' {
  pace.allowance = Math.min(PLAYLIST_BURST, pace.allowance + (now - pace.allowanceAt) / PLAYLIST_INTERVAL_MS);
  pace.allowanceAt = now;
  if (pace.allowance >= PLAYLIST_BURST) pace.refusals = 0;
  if (pace.allowance >= 1) {
    pace.allowance -= 1;
    return 'ok';
  }
  pace.refusals += 1;
  return pace.refusals >= SHARED_AFTER_REFUSALS ? 'shared' : 'wait';
}

/**
 * A fetch nginx found faster than one player (its own bucket of the same pace, hls-playlist-config.ts) and passed on:
 * refused, to wait ('wait') or for good once refused again and again with no rest of a full burst between ('shared').
 */
export function refuseOverRate(pace: PlaylistAllowance, now = Date.now()): 'wait' | 'shared' {
  if (now - (pace.refusedAt ?? 0) > PLAYLIST_BURST * PLAYLIST_INTERVAL_MS) pace.refusals = 0;
  pace.refusedAt = now;
  pace.allowance = 0;
  pace.allowanceAt = now;
  pace.refusals += 1;
  return pace.refusals >= SHARED_AFTER_REFUSALS ? 'shared' : 'wait';
}

export function tooFast(pace: PlaylistAllowance): ApiError {
  const wait = Math.ceil(((1 - pace.allowance) * PLAYLIST_INTERVAL_MS) / 1000);
  return new ApiError(
    429,
    'hls_session_busy',
    `This session's playlist is fetched faster than a player fetches it (once every ${PLAYLIST_INTERVAL_MS / 1000} s). ` +
      "Wait Retry-After seconds. A session is one player: each player starts from the service's hls_url.",
    { retryable: true, retryAfterSeconds: wait },
  );
}

export function sharedSession(): ApiError {
  return new ApiError(
    403,
    'hls_session_shared',
    'This session was fetched by several players at once and has ended: a session is one player. ' +
      "Each player starts from the service's hls_url (index.m3u8), which names a session of its own.",
  );
}
