/**
 * Child process of the streaming benchmark: one raw Icecast source (bench/icecast-source.ts) per broadcast URL,
 * replaying a CBR MP3 file at real-time pace, so the sources' CPU and memory are measured apart from the listeners.
 * argv: <mp3 file> <bytes per second> <broadcast url>... ; prints "ready <admitted> <refused>" once all have answered,
 * then "sent <bytes>" every second. Exits on SIGTERM or when stdin... (ignored): the parent kills it.
 */
import { readFileSync } from 'node:fs';
import { connectSource, mp3FrameOffsets, pumpSource, sourceTarget } from './icecast-source.js';
import { pool } from './pool.js';

const [file, rate, ...urls] = process.argv.slice(2);
const bytes = readFileSync(file);
const frames = mp3FrameOffsets(bytes);
const sent = { bytes: 0 };
const stops: Array<() => void> = [];
let refused = 0;
let closed = 0;
// A few at a time: Icecast listens with a backlog of 5, and connections beyond it wait for SYN retries (1 s, 3 s, …).
const answers = await pool(urls, 4, (u) => connectSource(sourceTarget(u)).catch(() => undefined));
for (const a of answers) {
  if (!a?.admitted) {
    refused++;
    a?.socket.destroy();
    continue;
  }
  a.socket.on('error', () => undefined);
  a.socket.once('close', () => {
    closed++;
  });
  stops.push(pumpSource(a.socket, bytes, frames, Number(rate), sent));
}
process.stdout.write(`ready ${urls.length - refused} ${refused}\n`);
setInterval(() => process.stdout.write(`sent ${sent.bytes} closed ${closed}\n`), 1000);
process.once('SIGTERM', () => {
  for (const s of stops) s();
  for (const a of answers) a?.socket.destroy();
  process.exit(0);
});
