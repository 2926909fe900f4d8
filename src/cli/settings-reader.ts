import { isIP } from 'node:net';
import { resolve } from 'node:path';

/** A setting with a value it does not accept: the message is one sentence naming it and what it takes. */
export class SettingError extends Error {}

/**
 * Reads environment variables as typed settings. Each read names its variable (kept in `names`, which
 * docs/configuration.md's
 * configuration table is checked against); an empty variable counts as unset.
 */
export class SettingsReader {
  readonly names = new Set<string>();

  constructor(private readonly env: NodeJS.ProcessEnv) {}

  /** The text of a variable, or undefined when it is unset or empty. */
  text(name: string): string | undefined {
    this.names.add(name);
    const value = this.env[name];
    return value === undefined || value === '' ? undefined : value;
  }

  path(name: string, fallback: string): string {
    return resolve(this.text(name) ?? fallback);
  }

  /** A whole number in [min, max]; `note` says what a special value means (e.g. "0 turns it off"). */
  whole(name: string, fallback: number, min = 0, max = Number.MAX_SAFE_INTEGER, note = ''): number {
    const text = this.text(name);
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `${min} or more` : `from ${min} to ${max}`;
      throw this.refuse(name, `a whole number ${range}${note && ` (${note})`}`, text);
    }
    return value;
  }

  /** A number in [min, max] (fractions allowed). */
  number(name: string, fallback: number | undefined, min: number, max: number): number | undefined {
    const text = this.text(name);
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isFinite(value) || value < min || value > max)
      throw this.refuse(name, `a number from ${min} to ${max}`, text);
    return value;
  }

  port(name: string, fallback: number): number {
    return this.whole(name, fallback, 0, 65535, '0: a free port');
  }

  choice<T extends string>(name: string, choices: readonly T[], fallback: T): T {
    const text = this.text(name);
    if (text === undefined) return fallback;
    if (!choices.includes(text as T)) throw this.refuse(name, `one of ${choices.join(', ')}`, text);
    return text as T;
  }

  /** on/off (also 1/0, true/false, yes/no). */
  flag(name: string, fallback: boolean): boolean {
    const text = this.text(name)?.toLowerCase();
    if (text === undefined) return fallback;
    if (['on', '1', 'true', 'yes'].includes(text)) return true;
    if (['off', '0', 'false', 'no'].includes(text)) return false;
    throw this.refuse(name, 'on or off', text);
  }

  /** Comma-separated IP addresses. */
  addresses(name: string): string[] {
    const list = (this.text(name) ?? '')
      .split(',')
      .map((a) => a.trim())
      .filter(Boolean);
    const wrong = list.find((a) => isIP(a) === 0);
    if (wrong) throw this.refuse(name, 'IP addresses separated by commas, e.g. 10.0.0.2,10.0.0.3', wrong);
    return list;
  }

  /** An http(s) URL; without query, fragment or credentials when `bare`. Returned without a trailing slash. */
  url(name: string, options: { bare?: boolean; example?: string } = {}): string | undefined {
    const text = this.text(name);
    if (text === undefined) return undefined;
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {
      /* refused below */
    }
    const extras = url && (url.search || url.hash || url.username || url.password);
    if (!url || !/^https?:$/.test(url.protocol) || (options.bare && extras)) {
      const what = options.bare ? 'an http(s) URL without query, fragment or credentials' : 'an http(s) URL';
      throw this.refuse(name, `${what}${options.example ? `, e.g. ${options.example}` : ''}`, text);
    }
    return url.href.replace(/\/+$/, '');
  }

  /** A value a reader of its own checks (it throws with what it accepts). */
  custom<T>(name: string, read: (text: string) => T): T | undefined {
    const text = this.text(name);
    if (text === undefined) return undefined;
    try {
      return read(text);
    } catch (e) {
      throw this.refuse(name, (e as Error).message, text);
    }
  }

  refuse(name: string, accepts: string, got: string): SettingError {
    return new SettingError(
      `${name} must be ${accepts}, got ${JSON.stringify(got.length > 80 ? `${got.slice(0, 80)}…` : got)}`,
    );
  }
}
