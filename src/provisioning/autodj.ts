import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { mp3EncoderArgs } from './mp3-encoding.js';
import { PcmPacer } from './pcm-pacer.js';
import { RestartBackoff, type RestartDelays } from './restart-backoff.js';
import {
  PCM_ARGS,
  PCM_BYTES_PER_SECOND,
  PCM_FRAME_BYTES,
  probeTrack,
  spawnDecoder,
  type TrackInfo,
} from './track-decoder.js';

// A temporary AutoDJ for one mount. One long-lived ffmpeg encoder holds the source connection and
// encodes PCM from its stdin; a decoder per track feeds it through a PcmPacer, which keeps real time
// and fills gaps with silence. Tracks therefore change without the source reconnecting.

export type AutoDjTrack = TrackInfo;

export interface AutoDjOptions {
  /** icecast://user:pass@host:port/mount */
  sourceUrl: string;
  bitrateKbps: number;
  /** Absolute file paths in play order; read again before every track, so edits take effect. */
  playlist: () => Promise<string[]> | string[];
  /** Plays each round in a new random order. */
  shuffle?: boolean;
  /** Called when a track starts playing, e.g. to update the mount's metadata. */
  onTrack?: (track: AutoDjTrack) => void | Promise<void>;
  ffmpeg?: string;
  ffprobe?: string;
  restartDelayMs?: RestartDelays;
}

export interface EncoderExit {
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
}

export type AutoDjEvents = {
  track: [AutoDjTrack];
  /** The file was skipped (or cut short): not audio, unreadable, or the decoder failed. */
  trackError: [{ path: string; error: Error }];
  onTrackError: [Error];
  /** The encoder died, so the source is off air; it is restarted unless stopped. */
  encoderExited: [EncoderExit];
  /** A new encoder was spawned after a crash; the mount's metadata is empty until the caller sets it again. */
  restarted: [{ pid: number; attempt: number }];
};

interface Running {
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

interface Decoding extends Running {
  /** The end of its stderr, for the error a failed track reports. */
  stderr: string;
}

/** With an empty or unplayable playlist, how often it is read again. */
const IDLE_POLL_MS = 1000;
/** PCM queued for an encoder that does not read it (e.g. while connecting) is dropped beyond this. */
const MAX_ENCODER_BACKLOG = PCM_BYTES_PER_SECOND;

export class AutoDj extends EventEmitter<AutoDjEvents> {
  private readonly order: PlayOrder;
  private readonly pacer: PcmPacer;
  private running = false;
  private stopping?: Promise<void>;
  private abort = new AbortController();
  private encoder?: Running;
  private decoder?: Running;
  private feeding?: Promise<void>;
  private encoderStderr = '';
  private encoderStartedAt = 0;
  private readonly restarts: RestartBackoff;
  private playing?: AutoDjTrack;
  /** Picked and being decoded, not on air yet: stop() gives these back so they play after start(). */
  private readonly pickedAhead = new Set<string>();

  constructor(private readonly options: AutoDjOptions) {
    super();
    this.order = new PlayOrder(options.shuffle ?? false);
    this.restarts = new RestartBackoff(options.restartDelayMs ?? { min: 250, max: 10_000 });
    this.pacer = new PcmPacer((pcm) => this.writeToEncoder(pcm), {
      bytesPerSecond: PCM_BYTES_PER_SECOND,
      frameBytes: PCM_FRAME_BYTES,
    });
  }

  get isRunning(): boolean {
    return this.running;
  }

  get encoderPid(): number | undefined {
    return this.encoder?.child.pid;
  }

  /** Seconds of silence sent so far (empty playlist, or a decoder that did not keep up). */
  get silenceSeconds(): number {
    return this.pacer.silenceBytes / PCM_BYTES_PER_SECOND;
  }

  /** Connects the source and starts playing. After stop(), playback resumes with the next track. */
  start(): void {
    if (this.running || this.stopping) throw new Error('autodj already running or stopping');
    this.running = true;
    this.abort = new AbortController();
    this.restarts.reset();
    this.spawnEncoder();
    this.pacer.start();
    this.feeding = this.feed();
  }

  /** Disconnects the source; resolves when the encoder and decoder processes are gone. */
  stop(): Promise<void> {
    if (!this.running) return this.stopping ?? Promise.resolve();
    this.running = false;
    this.abort.abort();
    this.restarts.cancel();
    this.pacer.stop();
    this.playing = undefined;
    for (const path of this.pickedAhead) this.order.putBack(path);
    this.pickedAhead.clear();
    this.stopping = Promise.all([
      this.feeding,
      terminate(this.decoder, 'SIGKILL'),
      terminate(this.encoder, 'SIGTERM'),
    ]).then(() => {
      this.stopping = undefined;
    });
    return this.stopping;
  }

  // While no encoder runs (between restarts) the audio is dropped: the playlist keeps time, like a radio.
  private writeToEncoder(pcm: Buffer): void {
    const stdin = this.encoder?.child.stdin;
    if (stdin?.writable && stdin.writableLength < MAX_ENCODER_BACKLOG) stdin.write(pcm);
  }

  private spawnEncoder(): void {
    const { ffmpeg = 'ffmpeg', bitrateKbps, sourceUrl } = this.options;
    // detached: out of the terminal's process group, so Ctrl-C reaches only serve, which stops it (and it ends by
    // itself at the end of its input if serve dies).
    const child = spawn(
      ffmpeg,
      [
        '-nostdin',
        '-hide_banner',
        '-loglevel',
        'error',
        // Without these ffmpeg reads ~1 s of input before connecting; the format is known anyway.
        '-probesize',
        '32',
        '-analyzeduration',
        '0',
        ...PCM_ARGS,
        '-i',
        'pipe:0',
        ...mp3EncoderArgs(bitrateKbps),
        '-content_type',
        'audio/mpeg',
        '-f',
        'mp3',
        sourceUrl,
      ],
      { stdio: ['pipe', 'ignore', 'pipe'], detached: true },
    );
    child.stdin!.on('error', () => {}); // EPIPE when it dies: handled on exit
    this.encoderStderr = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      this.encoderStderr = (this.encoderStderr + chunk).slice(-2000);
    });
    const running = { child, exited: exitOf(child) };
    this.encoder = running;
    this.encoderStartedAt = Date.now();
    void running.exited.then(({ code, signal }) => this.onEncoderExit(running, code, signal));
  }

  private onEncoderExit(running: Running, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.encoder === running) this.encoder = undefined;
    this.emit('encoderExited', { pid: running.child.pid ?? 0, code, signal, stderr: this.encoderStderr.trim() });
    if (!this.running) return;
    this.restarts.ranSince(this.encoderStartedAt);
    this.restarts.schedule((attempt) => {
      if (!this.running) return;
      this.spawnEncoder();
      this.emit('restarted', { pid: this.encoder?.child.pid ?? 0, attempt });
    });
  }

  private async feed(): Promise<void> {
    let failuresInARow = 0;
    while (this.running) {
      const playlist = await Promise.resolve(this.options.playlist()).catch(() => []);
      if (!this.running) break;
      const path = this.order.next(playlist);
      if (path === undefined) {
        await this.idle();
        continue;
      }
      this.pickedAhead.add(path);
      if (await this.play(path)) {
        failuresInARow = 0;
        continue;
      }
      this.pickedAhead.delete(path);
      // Every file failed in a row: wait rather than spin through ffprobe.
      if (++failuresInARow >= playlist.length) {
        failuresInARow = 0;
        await this.idle();
      }
    }
  }

  /** Waits before reading the playlist again; the pacer sends silence meanwhile. */
  private idle(): Promise<void> {
    return sleep(IDLE_POLL_MS, undefined, { signal: this.abort.signal }).catch(() => {});
  }

  /** Decodes one file into the pacer; false when it produced no audio. */
  private async play(path: string): Promise<boolean> {
    let decoder: Decoding;
    try {
      decoder = this.startDecoder(path);
    } catch (error) {
      this.emit('trackError', { path, error: error as Error }); // not an allowed container, or unreadable
      return false;
    }
    // The probe runs beside the decoder: a track change waits for the slower of the two, not for both in turn.
    const probing = probeTrack(path, { ffprobe: this.options.ffprobe, signal: this.abort.signal });
    probing.catch(() => {}); // awaited by pump, and below
    const bytes = await this.pump(decoder, probing);
    if (bytes === 0) decoder.child.kill('SIGKILL'); // the probe refused the file
    const { code, signal } = await decoder.exited;
    if (this.decoder === decoder) this.decoder = undefined;
    if (!this.running || (code === 0 && bytes > 0)) return bytes > 0;
    const refused = await probing.then(
      () => undefined,
      (error: Error) => error,
    );
    const reason = decoder.stderr.trim() || `no audio decoded (exit ${code ?? signal})`;
    this.emit('trackError', { path, error: refused ?? new Error(`${path}: ${reason}`) });
    return bytes > 0;
  }

  private startDecoder(path: string): Decoding {
    const child = spawnDecoder(path, this.options.ffmpeg);
    const decoder = { child, exited: exitOf(child), stderr: '' };
    child.stderr!.on('data', (chunk: Buffer) => {
      decoder.stderr = (decoder.stderr + chunk).slice(-2000);
    });
    this.decoder = decoder;
    return decoder;
  }

  /** Feeds the decoder's PCM to the pacer, marked where the track starts once the probe has named it; the bytes fed. */
  private async pump(decoder: Decoding, probing: Promise<AutoDjTrack>): Promise<number> {
    let bytes = 0;
    try {
      // Read from the start: node discards what a child wrote to a pipe nobody reads when the child exits.
      for await (const chunk of decoder.child.stdout! as AsyncIterable<Buffer>) {
        if (bytes === 0) {
          const track = await probing;
          this.pacer.mark(() => this.announce(track));
        }
        bytes += chunk.length;
        await this.pacer.push(chunk);
        if (!this.running) break;
      }
    } catch {
      // the decoder was killed, its stdout failed, or the probe refused the file: play() reports which
    }
    return bytes;
  }

  private announce(track: AutoDjTrack): void {
    this.pickedAhead.delete(track.path);
    this.playing = track;
    this.emit('track', track);
    if (!this.options.onTrack) return;
    // The pacer calls this from its clock: never let the callback throw into it.
    Promise.resolve()
      .then(() => this.options.onTrack!(track))
      .catch((error) => this.emit('onTrackError', error as Error));
  }
}

/**
 * What plays next: files not yet played this round, in playlist order or picked at random.
 * Working from the current playlist each time lets files be added, removed or reordered mid-round.
 */
export class PlayOrder {
  private played = new Set<string>();
  private last?: string;

  constructor(
    private readonly shuffle: boolean,
    private readonly random: () => number = Math.random,
  ) {}

  next(playlist: readonly string[]): string | undefined {
    let candidates = playlist.filter((path) => !this.played.has(path));
    if (candidates.length === 0) {
      this.played.clear();
      candidates = [...playlist];
      // A shuffled round does not open with the track that closed the previous one.
      if (this.shuffle && candidates.some((path) => path !== this.last))
        candidates = candidates.filter((path) => path !== this.last);
    }
    const path = this.shuffle ? candidates[Math.floor(this.random() * candidates.length)] : candidates[0];
    if (path !== undefined) {
      this.played.add(path);
      this.last = path;
    }
    return path;
  }

  /** Makes a picked file unplayed again, e.g. when it never went on air. */
  putBack(path: string): void {
    this.played.delete(path);
  }
}

function exitOf(child: ChildProcess): Running['exited'] {
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', () => resolve({ code: null, signal: null })); // spawn failed: there is no process
  });
}

async function terminate(running: Running | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!running) return;
  const { child } = running;
  // The encoder blocks reading its stdin, where a signal does not interrupt it; end of input does,
  // and lets it close the source connection cleanly.
  child.stdin?.end();
  if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  const escalate = setTimeout(() => child.kill('SIGKILL'), 1000);
  await running.exited;
  clearTimeout(escalate);
}
