import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/** The Icecast URL-auth callbacks we configure, in the order Icecast documents them. */
export const ICECAST_CALLBACK_ACTIONS = [
  'stream_auth',
  'mount_add',
  'mount_remove',
  'listener_add',
  'listener_remove',
] as const;
export type IcecastCallbackAction = (typeof ICECAST_CALLBACK_ACTIONS)[number];

export interface IcecastConfigOptions {
  host: string;
  port: number;
  adminUser: string;
  adminPassword: string;
  /** Callbacks go to `${callbackBaseUrl}/icecast/<action>`. */
  callbackBaseUrl: string;
  /** Holds the pid file, access.log and error.log. Must be writable by the Icecast user. */
  dir: string;
  maxClients: number;
  maxSources: number;
  /** Sent by Icecast as HTTP Basic credentials on every callback, so the callback route can refuse strangers. */
  callbackAuth?: { user: string; password: string };
  /** Where the Debian package keeps web/ and admin/ (the XSL templates admin and status pages need). */
  shareDir?: string;
  /** A file of the addresses Icecast accepts connections from (one a line); without it, any. */
  allowIpFile?: string;
  /**
   * Set when the proxy in front (HAProxy) decides every source and listener itself: the mounts get no authentication
   * at all (Icecast 2.4.4 puts every client of an authenticated mount through its one auth thread, callbacks or not),
   * and a source the proxy let in reaches Icecast as user \`source\` with this password, which only Icecast's and the
   * proxy's 0600 configs hold.
   */
  proxySourcePassword?: string;
  /** Further addresses Icecast listens on, at the same port (ICECAST_PROXY_ADDRESSES). */
  moreAddresses?: readonly string[];
}

/**
 * The loopback addresses Icecast listens on, all at its one port, when HAProxy is in front. Icecast 2.4's listen
 * backlog is 5 and cannot be configured: in a burst of listeners its accept thread, short of CPU, lets more connects
 * wait than that, and the kernel drops the rest (HAProxy tries each again after 250 ms). Each address is a socket
 * with a backlog of its own, and HAProxy spreads its listeners over them.
 */
export const ICECAST_PROXY_ADDRESSES: readonly string[] = Array.from({ length: 8 }, (_, i) => `127.0.0.${i + 1}`);

export function icecastCallbackUrl(callbackBaseUrl: string, action: IcecastCallbackAction): string {
  return `${callbackBaseUrl.replace(/\/+$/, '')}/icecast/${action}`;
}

export function escapeXml(value: string | number): string {
  return String(value)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}

const randomSecret = () => randomBytes(24).toString('base64url');

/** The default mount's URL auth: every callback Icecast is to make, with its credentials. */
function urlAuthentication(o: IcecastConfigOptions): string {
  const x = escapeXml;
  const option = (name: string, value: string) => `      <option name="${x(name)}" value="${x(value)}"/>`;
  const authOptions = [
    ...ICECAST_CALLBACK_ACTIONS.map((a) => option(a, icecastCallbackUrl(o.callbackBaseUrl, a))),
    option('auth_header', 'icecast-auth-user: 1'),
    option('timelimit_header', 'icecast-auth-timelimit:'),
    ...(o.callbackAuth ? [option('username', o.callbackAuth.user), option('password', o.callbackAuth.password)] : []),
  ];
  return `    <authentication type="url">
${authOptions.join('\n')}
    </authentication>
`;
}

/** Builds icecast.xml: loopback only, every mount governed through the default mount by URL auth or by the proxy. */
export function buildIcecastConfig(o: IcecastConfigOptions): string {
  const shareDir = o.shareDir ?? '/usr/share/icecast2';
  const x = escapeXml;
  // Without a proxy deciding sources the global source password is never used (stream_auth replaces it), and the
  // relay one never is (we run no Icecast relays), but Icecast ships "hackme" defaults: they get unguessable values.
  return `<icecast>
  <location>loopback</location>
  <hostname>${x(o.host)}</hostname>
  <limits>
    <clients>${x(o.maxClients)}</clients>
    <sources>${x(o.maxSources)}</sources>
    <queue-size>524288</queue-size>
    <client-timeout>30</client-timeout>
    <header-timeout>15</header-timeout>
    <source-timeout>10</source-timeout>
    <burst-on-connect>1</burst-on-connect>
    <burst-size>65535</burst-size>
  </limits>
  <authentication>
    <source-password>${x(o.proxySourcePassword ?? randomSecret())}</source-password>
    <relay-password>${x(randomSecret())}</relay-password>
    <admin-user>${x(o.adminUser)}</admin-user>
    <admin-password>${x(o.adminPassword)}</admin-password>
  </authentication>
${[o.host, ...(o.moreAddresses ?? [])].map((address) => listenSocket(address, o.port)).join('\n')}
  <mount type="default">
    <public>0</public>
    <hidden>1</hidden>
${o.proxySourcePassword === undefined ? urlAuthentication(o) : ''}  </mount>
  <fileserve>0</fileserve>
  <paths>
    <basedir>${x(shareDir)}</basedir>
    <logdir>${x(o.dir)}</logdir>
    <pidfile>${x(join(o.dir, 'icecast.pid'))}</pidfile>
    <webroot>${x(join(shareDir, 'web'))}</webroot>
    <adminroot>${x(join(shareDir, 'admin'))}</adminroot>
${o.allowIpFile ? `    <allow-ip>${x(o.allowIpFile)}</allow-ip>\n` : ''}  </paths>
  <logging>
    <accesslog>access.log</accesslog>
    <errorlog>error.log</errorlog>
    <loglevel>3</loglevel>
    <!-- logsize is in KiB; archived logs keep a date stamp instead of overwriting .old, so no access line is lost -->
    <logsize>1048576</logsize>
    <logarchive>1</logarchive>
  </logging>
  <security>
    <chroot>0</chroot>
  </security>
</icecast>
`;
}

function listenSocket(address: string, port: number): string {
  return `  <listen-socket>
    <port>${escapeXml(port)}</port>
    <bind-address>${escapeXml(address)}</bind-address>
  </listen-socket>`;
}
