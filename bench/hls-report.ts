import type { FleetPlayer } from './hls-fleet.js';
import { HLS_SEGMENT_SECONDS } from '../src/hls/url.js';

/** What N players did over the measured window, and every process's CPU seconds meanwhile. */
export interface HlsFigures {
  listeners: number;
  window: number;
  firstSeq: number;
  lastSeq: number;
  players: FleetPlayer[];
  lastSegment?: string;
  playlists: number;
  segments: number;
  bytes: number;
  serveCpu: number;
  pgCpu: number;
  renditionCpu: number;
  nginxCpu: number;
  nginx: boolean;
}

export interface EdgeFigures extends HlsFigures {
  originFetches: number;
}

interface Report {
  machine: string;
  quiet: { window: number; rendition: number; serve: number };
  direct: HlsFigures;
  edge?: EdgeFigures;
  firstSound?: number[] | Error;
}

/** The players who kept real time: got ≥ 95 % of the segments made in the window, from their first one. */
function realTime(f: HlsFigures): { kept: number; late: number } {
  const startOf = (p: FleetPlayer) => Math.max(f.firstSeq, Math.min(...p.fetched));
  const late = f.players.filter((p) => startOf(p) > f.firstSeq).length;
  const kept = f.players.filter((p) => {
    const got = p.fetched.filter((n) => n >= startOf(p) && n < f.lastSeq).length;
    return got / Math.max(1, f.lastSeq - startOf(p)) >= 0.95;
  }).length;
  return { kept, late };
}

/** serve's CPU seconds in the window beyond what it spends without listeners. */
const netServeCpu = (r: Report) => r.direct.serveCpu - r.quiet.serve * r.direct.window;
const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const per1000 = (cpu: number, n: number) => (n ? `${((cpu / n) * 1000).toFixed(3)} s` : 'n/a');

/**
 * serve's cores at 5,000 players, from this run's CPU per playlist and its idle CPU: a player fetching its playlist
 * once a target duration (as hls.js does on a live edge that moved) and once every 2 s (as the bench's players do).
 */
function extrapolated(r: Report): string {
  // Below its idle CPU: what the players cost serve is within this run's noise; the idle CPU is the bound.
  if (netServeCpu(r) <= 0)
    return `${pct(r.quiet.serve)} of one core (its idle CPU: the players' cost is within the noise)`;
  const perPlaylist = netServeCpu(r) / Math.max(1, r.direct.playlists);
  const at = (perSecond: number) => pct(r.quiet.serve + perPlaylist * perSecond);
  return `${at(5000 / HLS_SEGMENT_SECONDS)} of one core (one playlist per ${HLS_SEGMENT_SECONDS} s); ${at(5000 / 2)} (one per 2 s)`;
}

function rows(r: Report): string[] {
  const d = r.direct;
  const { kept, late } = realTime(d);
  const failures = d.players.reduce((n, p) => n + p.failures, 0);
  const retries = d.players.reduce((n, p) => n + p.retries, 0);
  const refused = d.players.reduce((n, p) => n + p.refused, 0);
  const out = [
    `| CPU of one rendition (its ffmpeg, ${r.quiet.window.toFixed(0)} s) | ${pct(r.quiet.rendition)} of one core |`,
    `| serve's CPU without HLS listeners | ${pct(r.quiet.serve)} of one core |`,
    `| HLS players (one stream, ${d.window.toFixed(0)} s measured) | ${d.listeners} |`,
    `| … in real time (got ≥ 95 % of the ${d.lastSeq - d.firstSeq} segments made meanwhile, from their first) | ` +
      `${kept} (${pct(kept / d.listeners)}); ${late} admitted after the window began |`,
    `| playlists answered / segments fetched in the window | ${d.playlists} / ${d.segments} |`,
    `| serve's CPU (sessions' first playlists; the others counted from nginx's log) | ${pct(d.serveCpu / d.window)} of one core; ` +
      `${per1000(d.serveCpu, d.playlists)} per 1,000 playlists fetched; **${per1000(netServeCpu(r), d.playlists)} beyond its idle CPU** |`,
    `| nginx's CPU (playlists and segments) | ${d.nginx ? `${pct(d.nginxCpu / d.window)} of one core; **${per1000(d.nginxCpu, d.playlists + d.segments)} per 1,000 requests**` : 'not installed'} |`,
    `| PostgreSQL's CPU meanwhile | ${pct(d.pgCpu / d.window)} of one core |`,
    `| rendition's CPU with them | ${pct(d.renditionCpu / d.window)} of one core |`,
    `| serve at 5,000 players of one stream (extrapolated from this run, not measured) | ${extrapolated(r)} |`,
    `| sent to players | ${((d.bytes * 8) / 1e6 / d.window).toFixed(1)} Mbit/s; ${failures} failed polls, ${refused} playlists refused; ` +
      `${retries} admissions retried |`,
  ];
  if (r.edge) {
    const e = r.edge;
    const segments = e.players.reduce((n, p) => n + p.fetched.length, 0);
    out.push(
      `| serve's and nginx's CPU with as many players through a CDN edge in front of nginx | ` +
        `${pct(e.serveCpu / e.window)} and ${pct(e.nginxCpu / e.window)} of one core; ` +
        `${e.originFetches} segment requests reached nginx for ${segments} segments played |`,
    );
  }
  if (r.firstSound) out.push(firstSoundRow(r.firstSound));
  return out;
}

function firstSoundRow(times: number[] | Error): string {
  const label = '| listen page, click to first sound in Chromium (HLS, 5 new profiles): median (min–max) | ';
  if (times instanceof Error) return `${label}failed: ${times.message.split('\n')[0]} |`;
  return `${label}${Math.round(times[2])} ms (${Math.round(times[0])}–${Math.round(times[4])}) |`;
}

/** The HLS section of docs/benchmarks.md. */
export function hlsSection(r: Report): string {
  return [
    '## HLS: CPU per rendition, per playlist and per segment (`npm run bench:hls`)',
    '',
    `Machine: ${r.machine}`,
    '(shared with other work: CPU seconds, not wall time, are the measure). One instant-stream at 128 kbps fed by',
    "ffmpeg; its rendition (MP3 decode, AAC encode, ffmpeg's HLS muxer, 4 s MPEG-TS segments); players (in child",
    "processes of 500) fetch their session's playlist every 2 s and each new segment once, all from nginx (serve admits",
    "a session's first playlist, then reads nginx's log of the others), on this machine, over loopback.",
    '',
    '| measure | value |',
    '|:--|--:|',
    ...rows(r),
    '',
  ].join('\n');
}
