import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import {
  buildIcecastConfig,
  handleIcecastCallback,
  ICECAST_PROXY_ADDRESSES,
  icecastResponseHeaders,
  IcecastSupervisor,
  parseMount,
  parseXml,
  startCallbackServer,
  type CallbackServer,
  type Decision,
  type ListenerAuthRequest,
  type ListenerLeftEvent,
  type MountDecider,
  type SourceAuthRequest,
} from '../src/provisioning/index.js';
import {
  connectListener,
  exitOf,
  hasMpegFrame,
  startFfmpegSource,
  waitFor,
  type Listener,
} from './support/streaming.js';
import { requireStreamingTools } from './support/system-tools.js';

// ---------- pieces that need no Icecast ----------

describe('icecast config', () => {
  it('escapes values and sends every callback to the base URL', () => {
    const xml = buildIcecastConfig({
      host: '127.0.0.1',
      port: 8000,
      adminUser: 'admin',
      adminPassword: 'a<b&"c\'',
      callbackBaseUrl: 'http://127.0.0.1:9000/internal/',
      dir: '/tmp/ice',
      maxClients: 10,
      maxSources: 2,
    });
    assert.match(xml, /<admin-password>a&lt;b&amp;&quot;c&apos;<\/admin-password>/);
    for (const action of ['stream_auth', 'mount_add', 'mount_remove', 'listener_add', 'listener_remove']) {
      assert.ok(
        xml.includes(`<option name="${action}" value="http://127.0.0.1:9000/internal/icecast/${action}"/>`),
        action,
      );
    }
    assert.ok(xml.includes('<option name="auth_header" value="icecast-auth-user: 1"/>'));
    assert.ok(xml.includes('<option name="timelimit_header" value="icecast-auth-timelimit:"/>'));
    assert.ok(xml.includes('<logdir>/tmp/ice</logdir>') && xml.includes('<accesslog>access.log</accesslog>'));
    assert.ok(!xml.includes('hackme'));
    // The generated file is well-formed XML.
    assert.equal(parseXml(xml).name, 'icecast');
  });
});

describe('icecast callbacks without icecast', () => {
  const calls: unknown[] = [];
  const decider: MountDecider = {
    authorizeSource: (r) => {
      calls.push(['source', r]);
      return { accept: r.pass === 'ok' };
    },
    authorizeListener: (r) => {
      calls.push(['listener', r]);
      return { accept: true, timeLimitSeconds: 12.7 };
    },
    listenerLeft: (e) => {
      calls.push(['left', e]);
    },
    mountAdded: (e) => {
      calls.push(['added', e]);
    },
    mountRemoved: (e) => {
      calls.push(['removed', e]);
    },
  };

  it('parses mounts with their query and refuses odd paths', () => {
    assert.deepEqual(parseMount('/abc?token=x%20y&b=2'), { mount: '/abc', query: { token: 'x y', b: '2' } });
    assert.deepEqual(parseMount('/a/b.mp3'), { mount: '/a/b.mp3', query: {} });
    for (const bad of ['', 'abc', '/', '/a/../b', '/a b', '/a\nb', `/${'x'.repeat(300)}`])
      assert.equal(parseMount(bad), null, bad);
  });

  it('maps forms onto the decider and refuses what it does not know', async () => {
    const listener = {
      action: 'listener_add',
      server: '127.0.0.1',
      port: '8000',
      client: '7',
      mount: '/abc?token=t',
      user: '',
      pass: '',
      ip: '127.0.0.1',
      agent: 'ua',
    };
    assert.deepEqual(await handleIcecastCallback('listener_add', listener, decider), {
      accept: true,
      timeLimitSeconds: 12.7,
    });
    assert.deepEqual(calls.at(-1), [
      'listener',
      { mount: '/abc', query: { token: 't' }, clientId: '7', ip: '127.0.0.1', userAgent: 'ua', user: '', pass: '' },
    ]);
    assert.equal(
      (
        await handleIcecastCallback(
          'stream_auth',
          { action: 'stream_auth', mount: '/abc', user: 'source', pass: 'no', ip: '1.2.3.4' },
          decider,
        )
      ).accept,
      false,
    );
    assert.equal(
      (await handleIcecastCallback('stream_auth', { mount: '/abc?x=1', user: 'source', pass: 'ok' }, decider)).accept,
      false,
    );
    assert.equal(
      (
        await handleIcecastCallback(
          'listener_remove',
          { ...listener, action: 'listener_remove', duration: '42' },
          decider,
        )
      ).accept,
      true,
    );
    assert.deepEqual(calls.at(-1), [
      'left',
      { mount: '/abc', query: { token: 't' }, clientId: '7', ip: '127.0.0.1', durationSeconds: 42 },
    ]);
    assert.deepEqual(await handleIcecastCallback('nope', { mount: '/abc' }, decider), {
      accept: false,
      message: 'unknown action',
    });
    assert.deepEqual(await handleIcecastCallback('listener_add', { ...listener, action: 'stream_auth' }, decider), {
      accept: false,
      message: 'action mismatch',
    });
    assert.deepEqual(await handleIcecastCallback('mount_add', { mount: '../x' }, decider), {
      accept: false,
      message: 'invalid mount',
    });
  });

  it('turns decisions into Icecast headers', () => {
    assert.deepEqual(icecastResponseHeaders({ accept: true, timeLimitSeconds: 12.7 }), {
      'icecast-auth-user': '1',
      'icecast-auth-timelimit': '12',
    });
    assert.deepEqual(icecastResponseHeaders({ accept: false, message: 'no\r\nX-Evil: 1' }), {
      'icecast-auth-message': 'no  X-Evil: 1',
    });
  });

  it('answers over HTTP and checks the callback credentials', async () => {
    const server = await startCallbackServer({ decider, auth: { user: 'ice', password: 'pw' } });
    try {
      const post = (path: string, body: string, authorization?: string) =>
        fetch(server.url + path, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...(authorization ? { authorization } : {}) },
        });
      const good = `Basic ${Buffer.from('ice:pw').toString('base64')}`;
      const accepted = await post('/icecast/stream_auth', 'action=stream_auth&mount=%2fabc&user=source&pass=ok', good);
      assert.equal(accepted.status, 200);
      assert.equal(accepted.headers.get('icecast-auth-user'), '1');
      const refused = await post('/icecast/stream_auth', 'action=stream_auth&mount=%2fabc&user=source&pass=no', good);
      assert.equal(refused.headers.get('icecast-auth-user'), null);
      assert.equal((await post('/icecast/stream_auth', 'mount=%2fabc&pass=ok')).status, 401);
      assert.equal((await post('/elsewhere', '', good)).status, 404);
    } finally {
      await server.close();
    }
  });
});

describe('admin XML reader', () => {
  it('reads elements, attributes, entities and mixed-case names', () => {
    const root = parseXml(
      '<?xml version="1.0"?>\n<icestats><source mount="/a&amp;b"><Listeners>2</Listeners><x/><t><![CDATA[<raw>]]></t><n>&lt;&#65;&#x42;</n></source></icestats>\n',
    );
    const source = root.children[0];
    assert.equal(source.attributes.mount, '/a&b');
    assert.deepEqual(
      source.children.map((c) => [c.name, c.text]),
      [
        ['Listeners', '2'],
        ['x', ''],
        ['t', '<raw>'],
        ['n', '<AB'],
      ],
    );
    assert.throws(() => parseXml('<a><b></a>'));
    assert.throws(() => parseXml('<a>'));
  });
});

// ---------- end to end with the real icecast2 and ffmpeg ----------

requireStreamingTools(['icecast2', 'ffmpeg', 'setpriv']);

const MOUNT = '/test-abc';
const OTHER_MOUNT = '/test-other';

/** An in-memory decider: two known mounts, at most two listeners each, a time limit per listener. */
class TestDecider implements MountDecider {
  readonly mounts = new Map([
    [MOUNT, { user: 'source', pass: 's3cret' }],
    [OTHER_MOUNT, { user: 'source', pass: 'other-pass' }],
  ]);
  readonly maxListeners = 2;
  timeLimitSeconds = 600;
  readonly listeners = new Map<string, Set<string>>();
  readonly sourceRequests: Array<SourceAuthRequest & { decision: Decision }> = [];
  readonly listenerRequests: Array<ListenerAuthRequest & { at: number; decision: Decision }> = [];
  readonly left: Array<ListenerLeftEvent & { at: number }> = [];
  readonly added: string[] = [];
  readonly removed: string[] = [];

  authorizeSource(r: SourceAuthRequest): Decision {
    const known = this.mounts.get(r.mount);
    const decision =
      known && known.user === r.user && known.pass === r.pass
        ? { accept: true }
        : { accept: false, message: 'bad source credentials' };
    this.sourceRequests.push({ ...r, decision });
    return decision;
  }

  authorizeListener(r: ListenerAuthRequest): Decision {
    const current = this.listeners.get(r.mount) ?? new Set<string>();
    let decision: Decision;
    if (!this.mounts.has(r.mount)) decision = { accept: false, message: 'unknown mount' };
    else if (current.size >= this.maxListeners) decision = { accept: false, message: 'listener limit reached' };
    else {
      current.add(r.clientId);
      this.listeners.set(r.mount, current);
      decision = { accept: true, timeLimitSeconds: this.timeLimitSeconds };
    }
    this.listenerRequests.push({ ...r, at: Date.now(), decision });
    return decision;
  }

  listenerLeft(e: ListenerLeftEvent): void {
    this.listeners.get(e.mount)?.delete(e.clientId);
    this.left.push({ ...e, at: Date.now() });
  }

  mountAdded(e: { mount: string }): void {
    this.added.push(e.mount);
  }
  mountRemoved(e: { mount: string }): void {
    this.removed.push(e.mount);
  }
}

/** Gone, or a zombie nobody has reaped yet (containers' init may not reap). */
function processGone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? true;
  } catch {
    return true;
  }
}

describe('a real Icecast and its URL-auth callbacks (supervisor in the test process)', () => {
  const decider = new TestDecider();
  const processes: ChildProcess[] = [];
  const listeners: Listener[] = [];
  let callbacks: CallbackServer;
  let supervisor: IcecastSupervisor;
  let dataDir: string;
  let source: ChildProcess;
  let streamUrl: string;

  before(
    async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'icecast-test-'));
      await chmod(dataDir, 0o755); // the icecast2 user must be able to reach its data dir inside
      callbacks = await startCallbackServer({ decider });
      supervisor = new IcecastSupervisor({
        dataDir: join(dataDir, 'icecast'),
        callbackBaseUrl: callbacks.url,
        maxClients: 50,
        maxSources: 5,
      });
      const started = once(supervisor, 'started');
      // Seen once in CI: Icecast exited right after it first answered (the supervisor starts it again); say so.
      supervisor.on('exited', (exit) => console.log(`icecast exited: ${JSON.stringify(exit)}`));
      await supervisor.start();
      const [{ startMs }] = await started;
      console.log(`icecast answered ${startMs} ms after spawn, on ${supervisor.baseUrl}`);
      streamUrl = `${supervisor.baseUrl}${MOUNT}`;

      source = startFfmpegSource(`icecast://source:s3cret@127.0.0.1:${supervisor.port}${MOUNT}`);
      processes.push(source);
      const sourceBegan = performance.now();
      // Through a restart by the supervisor too: the source, cut by it, is started again.
      let spawnedAt = performance.now();
      await waitFor('the mount to go live', async () => {
        const ended = source.exitCode !== null || source.signalCode !== null;
        if (ended && performance.now() - spawnedAt > 1000) {
          spawnedAt = performance.now();
          source = startFfmpegSource(`icecast://source:s3cret@127.0.0.1:${supervisor.port}${MOUNT}`);
          processes.push(source);
        }
        return (await supervisor.admin.listMounts().catch(() => [])).some((m) => m.mount === MOUNT);
      });
      console.log(`${MOUNT} live ${Math.round(performance.now() - sourceBegan)} ms after ffmpeg started`);
    },
    { timeout: 30_000 },
  );

  after(async () => {
    for (const listener of listeners) listener.close();
    for (const child of processes) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await supervisor?.stop();
    await callbacks?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('refuses a source with a wrong password', { timeout: 20_000 }, async () => {
    const impostor = startFfmpegSource(`icecast://source:wrong@127.0.0.1:${supervisor.port}${OTHER_MOUNT}`);
    processes.push(impostor);
    let stderr = '';
    impostor.stderr!.on('data', (chunk) => {
      stderr += chunk;
    });
    assert.notEqual(await exitOf(impostor, 10_000), 0);
    assert.match(stderr, /401|Unauthorized|authorization failed/i);
    assert.ok(decider.sourceRequests.some((r) => r.mount === OTHER_MOUNT && r.pass === 'wrong' && !r.decision.accept));
    assert.ok(!(await supervisor.admin.listMounts()).some((m) => m.mount === OTHER_MOUNT));
    assert.ok(decider.sourceRequests.some((r) => r.mount === MOUNT && r.decision.accept));
    assert.deepEqual(decider.added, [MOUNT]);
  });

  it('streams MP3 to two listeners', { timeout: 20_000 }, async () => {
    for (let i = 0; i < 2; i++) {
      const requested = Date.now();
      const listener = await connectListener(streamUrl);
      listeners.push(listener);
      assert.equal(listener.status, 200);
      assert.equal(listener.contentType, 'audio/mpeg');
      const call = decider.listenerRequests.at(-1)!;
      console.log(
        `listener ${i + 1}: response headers after ${listener.headersAfterMs} ms (callback reached the decider after ${call.at - requested} ms)`,
      );
    }
    for (const listener of listeners) {
      await waitFor('MP3 bytes', () => listener.received().length >= 8000);
      assert.ok(hasMpegFrame(listener.received()), 'an MPEG audio frame header');
    }
  });

  it('refuses a third listener', { timeout: 10_000 }, async () => {
    const third = await connectListener(streamUrl);
    third.close();
    assert.equal(third.status, 401);
    assert.deepEqual(decider.listenerRequests.at(-1)!.decision, { accept: false, message: 'listener limit reached' });
    assert.equal(decider.listeners.get(MOUNT)!.size, 2);
  });

  it('reports two listeners in the admin stats', { timeout: 20_000 }, async () => {
    const stats = await waitFor('stats with two listeners', async () => {
      const [mount] = await supervisor.admin.stats(MOUNT);
      return mount?.listeners === 2 && mount.totalBytesRead > 0 ? mount : undefined;
    });
    assert.equal(stats.mount, MOUNT);
    assert.equal(stats.sourceIp, '127.0.0.1');
    assert.ok(stats.listenerPeak >= 2);
    assert.ok(stats.streamStart instanceof Date && Math.abs(Date.now() - stats.streamStart.getTime()) < 60_000);
    const clients = await supervisor.admin.listClients(MOUNT);
    assert.deepEqual(new Set(clients.map((c) => c.id)), decider.listeners.get(MOUNT));
    assert.ok(clients.every((c) => c.ip === '127.0.0.1' && c.userAgent === 'icecast-test'));
    assert.equal(await supervisor.admin.updateMetadata(MOUNT, 'Sine & friends – 440 Hz'), true);
  });

  it('kills one listener and cuts off a time-limited one', { timeout: 20_000 }, async () => {
    const [first] = await supervisor.admin.listClients(MOUNT);
    assert.equal(await supervisor.admin.killClient(MOUNT, first.id), true);
    assert.equal(await supervisor.admin.killClient(MOUNT, '999999'), false);
    await waitFor('listener_remove for the killed listener', () => decider.left.some((e) => e.clientId === first.id));
    assert.equal(decider.listeners.get(MOUNT)!.size, 1);

    // Icecast checks the limit against a whole-second clock: a limit of N cuts after N-1 to N seconds.
    decider.timeLimitSeconds = 3;
    const began = Date.now();
    const limited = await connectListener(streamUrl);
    listeners.push(limited);
    assert.equal(limited.status, 200);
    const limitedId = decider.listenerRequests.at(-1)!.clientId;
    await limited.ended;
    const cutAfterMs = Date.now() - began;
    assert.ok(cutAfterMs >= 2000 && cutAfterMs < 7000, `cut off after ${cutAfterMs} ms`);
    const left = await waitFor('listener_remove for the limited listener', () =>
      decider.left.find((e) => e.clientId === limitedId),
    );
    assert.ok(left.durationSeconds >= 2 && left.durationSeconds <= 6, `duration ${left.durationSeconds}`);
    assert.ok(limited.received().length > 8000);
  });

  it('disconnects the source on killSource', { timeout: 20_000 }, async () => {
    assert.equal(await supervisor.admin.killSource(MOUNT), true);
    assert.notEqual(await exitOf(source, 10_000), 0);
    await waitFor('mount_remove', () => decider.removed.includes(MOUNT));
    assert.ok(!(await supervisor.admin.listMounts()).some((m) => m.mount === MOUNT));
    assert.equal(await supervisor.admin.killSource(MOUNT), false);
    await Promise.all(listeners.map((l) => l.ended));
  });

  it('writes an access log with per-listener bytes into its data dir', { timeout: 10_000 }, async () => {
    const log = await waitFor('access log lines', async () => {
      const text = await readFile(supervisor.accessLogPath, 'utf8').catch(() => '');
      return text.split('\n').filter((line) => line.includes(`"GET ${MOUNT} `) && line.includes(' 200 ')).length >= 3
        ? text
        : undefined;
    });
    // e.g. 127.0.0.1 - - [date] "GET /test-abc HTTP/1.1" 200 28244 "-" "icecast-test" 3
    const bytes = [
      ...log.matchAll(new RegExp(`"GET ${MOUNT} HTTP/1\\.1" 200 (\\d+) "[^"]*" "icecast-test" (\\d+)`, 'g')),
    ].map((m) => Number(m[1]));
    assert.equal(bytes.length, 3);
    assert.ok(
      bytes.every((b) => b > 8000),
      String(bytes),
    );
  });

  it('restarts icecast after it is killed', { timeout: 20_000 }, async () => {
    const oldPid = supervisor.pid!;
    const port = supervisor.port;
    const exited = once(supervisor, 'exited');
    const restarted = once(supervisor, 'restarted');
    const began = performance.now();
    process.kill(oldPid, 'SIGKILL');
    const [exit] = await exited;
    assert.equal(exit.signal, 'SIGKILL');
    const [event] = await restarted;
    console.log(
      `restarted ${Math.round(performance.now() - began)} ms after SIGKILL (icecast answered ${event.startMs} ms after spawn)`,
    );
    assert.equal(event.port, port);
    assert.notEqual(event.pid, oldPid);
    assert.equal(supervisor.pid, event.pid);
    assert.deepEqual(await supervisor.admin.listMounts(), []);
  });

  it('does not outlive a parent that is killed', { timeout: 40_000 }, async () => {
    const script = join(dataDir, 'orphan.mts');
    const index = new URL('../src/provisioning/index.ts', import.meta.url).pathname;
    await writeFile(
      script,
      `
      import { IcecastSupervisor } from ${JSON.stringify(index)};
      const s = new IcecastSupervisor({ dataDir: ${JSON.stringify(join(dataDir, 'orphan'))}, callbackBaseUrl: 'http://127.0.0.1:9' });
      s.on('restarted', (e) => console.log('pid', e.pid));
      await s.start();
      console.log('pid', s.pid);
    `,
    );
    const parent = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    processes.push(parent);
    let out = '';
    parent.stdout!.on('data', (chunk) => {
      out += chunk;
    });
    // The last Icecast it started: Icecast 2.4.4 itself sometimes dies at start (see terminal.test.ts), and the
    // supervisor starts another.
    const pid = await waitFor('a running child icecast', () => {
      const last = Number([...out.matchAll(/pid (\d+)/g)].at(-1)?.[1]);
      return last && !processGone(last) ? last : undefined;
    });
    parent.kill('SIGKILL');
    // The kernel kills it at once (pdeathsig); the bound is for a machine busy with the whole suite.
    await waitFor('icecast to die with its parent', () => processGone(pid), 15_000);
    assert.ok(existsSync(join(dataDir, 'orphan', 'icecast.xml')));
  });
});

describe('an Icecast listening on several addresses of one port (as HAProxy fronts it)', () => {
  const more = ICECAST_PROXY_ADDRESSES.slice(1);
  let dataDir: string;
  let squatter: net.Server;
  let taken: number;
  const supervisors: IcecastSupervisor[] = [];

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'icecast-addresses-'));
    await chmod(dataDir, 0o755);
    // Another program on one of the addresses only, at a port free on the others.
    squatter = net.createServer();
    await new Promise<void>((resolve) => squatter.listen(0, more[3], resolve));
    taken = (squatter.address() as net.AddressInfo).port;
  });
  after(async () => {
    for (const s of supervisors) await s.stop();
    squatter?.close();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  const supervisor = (name: string, port: { port?: number; preferredPort?: number }) => {
    const s = new IcecastSupervisor({
      dataDir: join(dataDir, name),
      callbackBaseUrl: 'http://127.0.0.1:9',
      moreAddresses: more,
      ...port,
    });
    supervisors.push(s);
    return s;
  };
  const icecastAddresses = (port: number) =>
    [
      ...execFileSync('ss', ['-ltnpH', `( sport = :${port} )`], { encoding: 'utf8' }).matchAll(
        /^LISTEN\s+\d+\s+\d+\s+(\S+):\d+\s.*"icecast2"/gm,
      ),
    ]
      .map((m) => m[1])
      .sort();

  it("does not run when one address is another program's: its listeners would go there", async () => {
    const fixed = supervisor('fixed', { port: taken });
    await assert.rejects(
      fixed.start(),
      new RegExp(`could not listen on ${more[3].replaceAll('.', '\\.')} at port ${taken}`),
    );
    assert.equal(fixed.pid, undefined, 'the Icecast that started is stopped');
    assert.deepEqual(icecastAddresses(taken), []);
  });

  it('moves to a port free on every address, and listens on all of them', async () => {
    const moved = supervisor('moved', { preferredPort: taken });
    await moved.start();
    assert.notEqual(moved.port, taken);
    assert.deepEqual(icecastAddresses(moved.port), [...ICECAST_PROXY_ADDRESSES].sort());
  });
});
