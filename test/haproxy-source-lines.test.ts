// What serve makes of HAProxy's lines about sources (ICECAST_PROXY=haproxy): a source Icecast took is present until
// its end-of-connection line, and only such a source's end counts (usage, mount_remove's work).
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { HaproxyCloseEvents } from '../src/provisioning/haproxy-close-events.js';
import type { SourceEnd, SourcePresence } from '../src/provisioning/source-end.js';

const ID = '6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f';
const OTHER = '0b6f5c1e-2d3a-4f5b-8c7d-9e0f1a2b3c4d';

async function lines() {
  const presence: SourcePresence[] = [];
  const ends: SourceEnd[] = [];
  const events = new HaproxyCloseEvents(
    (end) => ends.push(end),
    undefined,
    (p) => presence.push(p),
  );
  await events.start();
  const socket = dgram.createSocket('udp4');
  // Each line is followed by a marker line (an unknown listener's close, ignored): once the marker is in, so is the line.
  let marker = 0;
  const send = async (text: string) => {
    const seen = new Promise<void>((resolve) => events.whenClosed(`marker-${++marker}`, resolve));
    for (const line of [text, `${events.secret} marker-${marker} 0\n`])
      await new Promise<void>((resolve) => socket.send(line, events.port, '127.0.0.1', () => resolve()));
    await Promise.race([seen, sleep(5000)]);
  };
  const stop = () => {
    socket.close();
    events.stop();
  };
  return { events, presence, ends, send, stop, secret: events.secret };
}

/** A source's end-of-connection line: `<secret> - <sent> <mount> <head> <read> <ms> <id>`. */
const closeLine = (secret: string, id: string, read: number) => `${secret} - 63 /m.mp3 120 ${read} 8000 ${id}\n`;

describe("HAProxy's lines about sources", () => {
  test('a source taken by Icecast is present until its connection closes, with its exact body bytes', async () => {
    const l = await lines();
    try {
      await l.send(`${l.secret} + ${ID} /m.mp3\n`);
      assert.deepEqual(l.presence, [{ mount: '/m.mp3', present: true }]);
      await l.send(closeLine(l.secret, ID, 64_120));
      assert.deepEqual(l.presence, [
        { mount: '/m.mp3', present: true },
        { mount: '/m.mp3', present: false },
      ]);
      assert.deepEqual(
        l.ends.map((e) => [e.mount, e.bytes, e.closedAt - e.openedAt]),
        [['/m.mp3', 64_000, 8000]],
      );
    } finally {
      l.stop();
    }
  });

  test("a refused source's close is not the present source's end, and a forged line does nothing", async () => {
    const l = await lines();
    try {
      await l.send(`${l.secret} + ${ID} /m.mp3\n`);
      // A second source on the same mount, refused (by serve, or by Icecast: the mount is held): no start line.
      await l.send(closeLine(l.secret, OTHER, 400));
      await l.send(`wrong-secret + ${OTHER} /m.mp3\n`);
      await l.send(closeLine('wrong-secret', ID, 1_000));
      assert.deepEqual(l.presence, [{ mount: '/m.mp3', present: true }]);
      assert.deepEqual(l.ends, []);
    } finally {
      l.stop();
    }
  });

  test('an end that came before its start cancels it; HAProxy gone ends every source it carried', async () => {
    const l = await lines();
    try {
      await l.send(closeLine(l.secret, ID, 1_000));
      await l.send(`${l.secret} + ${ID} /m.mp3\n`);
      assert.deepEqual(l.presence, []);
      await l.send(`${l.secret} + ${OTHER} /n.mp3\n`);
      l.events.allClosed();
      assert.deepEqual(l.presence, [
        { mount: '/n.mp3', present: true },
        { mount: '/n.mp3', present: false },
      ]);
      await l.send(closeLine(l.secret, OTHER, 5_000));
      assert.equal(l.presence.length, 2, 'its late close line is not a second end');
    } finally {
      l.stop();
    }
  });
});
