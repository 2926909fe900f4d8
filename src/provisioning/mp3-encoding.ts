// MP3 at 44.1 or 48 kHz (MPEG-1) has no bitrate below 32 kbps: libmp3lame silently sends 32 kbps when asked for 16 or
// 24, twice what was bought. MPEG-2 sample rates (24 kHz and lower) go down to 8 kbps. Checked with ffmpeg's libmp3lame.

/** The sample rate to encode MP3 at for a bitrate: 22.05 kHz below 32 kbps, 44.1 kHz from there. */
export function mp3SampleRate(kbps: number): number {
  return kbps < 32 ? 22050 : 44100;
}

/** ffmpeg output options for MP3 at `kbps`, with a sample rate that can carry it. */
export function mp3EncoderArgs(kbps: number): string[] {
  return ['-c:a', 'libmp3lame', '-b:a', `${kbps}k`, '-ar', String(mp3SampleRate(kbps))];
}
