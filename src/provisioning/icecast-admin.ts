// Client for Icecast's admin API (HTTP Basic). Answers are small XML documents, read with the
// tiny parser at the bottom of this file rather than a dependency.
import http from 'node:http';
import https from 'node:https';
import { proxiedAgent } from './listener-end.js';

export interface MountSummary {
  mount: string;
  listeners: number;
  contentType: string;
}

export interface MountStats {
  mount: string;
  listeners: number;
  listenerPeak: number;
  /** null when Icecast says "unlimited". */
  maxListeners: number | null;
  /** Resets when a source reconnects; the access log has exact per-listener bytes. */
  totalBytesSent: number;
  totalBytesRead: number;
  streamStart: Date | null;
  sourceIp: string | null;
  /** The song title the source last sent (ICY metadata or an updinfo), absent when none. */
  title?: string;
}

export interface ListenerInfo {
  id: string;
  ip: string;
  userAgent: string;
  connectedSeconds: number;
  /** The HTTP Basic user it connected with, when it sent one (HAProxy's ticket for the listeners it admitted). */
  user?: string;
}

export class IcecastAdminError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'IcecastAdminError';
  }
}

export interface IcecastAdminOptions {
  baseUrl: string;
  user: string;
  password: string;
  timeoutMs?: number;
}

export class IcecastAdmin {
  private readonly authorization: string;

  constructor(private readonly options: IcecastAdminOptions) {
    this.authorization = `Basic ${Buffer.from(`${options.user}:${options.password}`).toString('base64')}`;
  }

  async listMounts(): Promise<MountSummary[]> {
    const root = await this.getXml('listmounts');
    return root.children
      .filter((e) => e.name === 'source')
      .map((source) => ({
        mount: source.attributes.mount ?? '',
        listeners: toNumber(childText(source, 'listeners')),
        contentType: childText(source, 'content-type') ?? '',
      }));
  }

  /** Stats for every live mount, or only for `mount` (Icecast's numbers lag by a few seconds). */
  async stats(mount?: string): Promise<MountStats[]> {
    const root = await this.getXml('stats', mount === undefined ? {} : { mount });
    return root.children
      .filter((e) => e.name === 'source')
      .map((source) => {
        const maxListeners = childText(source, 'max_listeners');
        const start = childText(source, 'stream_start_iso8601');
        return {
          mount: source.attributes.mount ?? '',
          listeners: toNumber(childText(source, 'listeners')),
          listenerPeak: toNumber(childText(source, 'listener_peak')),
          maxListeners: maxListeners === undefined || maxListeners === 'unlimited' ? null : toNumber(maxListeners),
          totalBytesSent: toNumber(childText(source, 'total_bytes_sent')),
          totalBytesRead: toNumber(childText(source, 'total_bytes_read')),
          // Icecast writes "+0000"; Date wants "+00:00".
          streamStart: start ? new Date(start.replace(/([+-]\d\d)(\d\d)$/, '$1:$2')) : null,
          sourceIp: childText(source, 'source_ip') ?? null,
          ...(childText(source, 'title') && { title: childText(source, 'title') }),
        };
      });
  }

  async listClients(mount: string): Promise<ListenerInfo[]> {
    const root = await this.getXml('listclients', { mount });
    const source = root.children.find((e) => e.name === 'source');
    return (source?.children ?? [])
      .filter((e) => e.name === 'listener')
      .map((listener) => {
        const agent = proxiedAgent(childText(listener, 'useragent') ?? '');
        return {
          id: childText(listener, 'id') ?? '',
          ip: childText(listener, 'ip') ?? '',
          userAgent: agent.userAgent,
          connectedSeconds: toNumber(childText(listener, 'connected')),
          user: childText(listener, 'username') ?? agent.user,
        };
      });
  }

  /** False when the mount or client does not exist. */
  killClient(mount: string, id: string): Promise<boolean> {
    return this.command('killclient', { mount, id });
  }

  /** Disconnects the source; its listeners are dropped too. False when the mount is not live. */
  killSource(mount: string): Promise<boolean> {
    return this.command('killsource', { mount });
  }

  updateMetadata(mount: string, song: string): Promise<boolean> {
    return this.command('metadata', { mount, mode: 'updinfo', song });
  }

  /**
   * With node:http rather than fetch: a host asks its Icecast several times a second (the stats, the mounts, the
   * clients of each live mount), and fetch cost about three times the CPU per request. A connection per request.
   */
  private request(path: string, params: Record<string, string>): Promise<{ status: number; body: string }> {
    const url = new URL(`${this.options.baseUrl}/admin/${path}?${new URLSearchParams(params)}`);
    const options = {
      headers: { authorization: this.authorization },
      agent: false,
      signal: AbortSignal.timeout(this.options.timeoutMs ?? 5000),
    };
    return new Promise((resolve, reject) => {
      const req = (url.protocol === 'https:' ? https : http).get(url, options, (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          body += chunk;
        });
        response.on('error', reject);
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
      });
      req.on('error', reject);
    });
  }

  private async getXml(path: string, params: Record<string, string> = {}): Promise<XmlElement> {
    const { status, body } = await this.request(path, params);
    if (status !== 200) throw new IcecastAdminError(`icecast admin ${path}: HTTP ${status}`, status);
    return parseXml(body);
  }

  // Icecast answers a command with <iceresponse><return>1|0</return>, or HTTP 400 when the mount is unknown.
  private async command(path: string, params: Record<string, string>): Promise<boolean> {
    const { status, body } = await this.request(path, params);
    if (status === 400) return false;
    if (status !== 200) throw new IcecastAdminError(`icecast admin ${path}: HTTP ${status}`, status);
    return childText(parseXml(body), 'return') === '1';
  }
}

function toNumber(text: string | undefined): number {
  const n = Number(text);
  return Number.isFinite(n) ? n : 0;
}

// ---- a tiny XML reader: elements, attributes, text and entities; enough for Icecast's answers ----

export interface XmlElement {
  name: string;
  attributes: Record<string, string>;
  children: XmlElement[];
  text: string;
}

/** The first text of each child's lower-cased name, built once per element (a stats answer reads 11 per mount). */
const childTexts = new WeakMap<XmlElement, Map<string, string>>();

/** Text of the first child named `name`, compared case-insensitively (Icecast mixes "Listeners" and "listeners"). */
export function childText(element: XmlElement, name: string): string | undefined {
  let texts = childTexts.get(element);
  if (!texts) {
    texts = new Map();
    for (const child of element.children) {
      const key = child.name.toLowerCase();
      if (!texts.has(key)) texts.set(key, child.text);
    }
    childTexts.set(element, texts);
  }
  return texts.get(name.toLowerCase());
}

const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };

function decodeEntities(text: string): string {
  if (!text.includes('&')) return text;
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, entity: string) => {
    if (entity.startsWith('#x')) return String.fromCodePoint(Number.parseInt(entity.slice(2), 16));
    if (entity.startsWith('#')) return String.fromCodePoint(Number.parseInt(entity.slice(1), 10));
    return ENTITIES[entity] ?? whole;
  });
}

// Text first, then the element tags (most of an answer), then the rarer forms.
const TOKEN =
  /([^<]+)|<\/([\w:.-]+)\s*>|<([\w:.-]+)((?:\s+[\w:.-]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*(\/?)>|<!\[CDATA\[([\s\S]*?)\]\]>|<!--[\s\S]*?-->|<\?[\s\S]*?\?>|<!DOCTYPE[^>]*>/y;
const ATTRIBUTE = /([\w:.-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;

export function parseXml(xml: string): XmlElement {
  const root: XmlElement = { name: '#document', attributes: {}, children: [], text: '' };
  const open: XmlElement[] = [root];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < xml.length) {
    const at = TOKEN.lastIndex;
    const m = TOKEN.exec(xml);
    if (!m) throw new Error(`invalid XML at offset ${at}`);
    const [, text, closing, opening, attributeText, selfClosing, cdata] = m;
    const current = open[open.length - 1];
    if (opening !== undefined) {
      const element: XmlElement = { name: opening, attributes: {}, children: [], text: '' };
      if (attributeText)
        for (const a of attributeText.matchAll(ATTRIBUTE)) element.attributes[a[1]] = decodeEntities(a[2] ?? a[3]);
      current.children.push(element);
      if (!selfClosing) open.push(element);
    } else if (closing !== undefined) {
      if (current.name !== closing || open.length === 1) throw new Error(`unexpected </${closing}> at offset ${at}`);
      open.pop();
    } else if (cdata !== undefined) {
      current.text += cdata;
    } else if (text !== undefined) {
      current.text += decodeEntities(text);
    }
  }
  if (open.length !== 1) throw new Error(`unclosed <${open[open.length - 1].name}>`);
  const [documentElement] = root.children;
  if (!documentElement) throw new Error('empty XML document');
  return documentElement;
}
