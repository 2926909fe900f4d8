import type { SourceEndListener, SourcePresenceListener } from './source-end.js';

// An end may come before the start it follows (two datagrams); it is kept this long for it.
const EARLY_END_MS = 60_000;
const MAX_EARLY_ENDS = 1_000;

/**
 * The sources HAProxy let in, from its lines to serve (haproxy-close-events.ts): `+ <id> <mount>` when Icecast took
 * one, its end-of-connection line (with the same id) when it closed. Only a source Icecast took is present and has
 * its usage counted: one refused (by serve, or by Icecast for a mount already held) leaves the mount's source alone.
 */
export class HaproxySources {
  private readonly live = new Map<string, string>();
  private readonly early = new Map<string, number>();

  constructor(
    private readonly onPresence?: SourcePresenceListener,
    private readonly onEnd?: SourceEndListener,
  ) {}

  started(id: string, mount: string): void {
    if (!id || !mount.startsWith('/') || this.live.has(id)) return;
    if (this.early.delete(id)) return;
    this.live.set(id, mount);
    this.onPresence?.({ mount, present: true });
  }

  /** `<mount> <head length> <bytes read> <ms> <id>` of a source's end-of-connection line. */
  ended([mount = '-', head, read, ms, id = '-']: string[]): void {
    if (!this.live.delete(id)) return this.rememberEarly(id);
    const [headBytes, readBytes, duration] = [head, read, ms].map(Number);
    if (this.onEnd && [headBytes, readBytes, duration].every(Number.isFinite)) {
      const closedAt = Date.now();
      const bytes = Math.max(0, readBytes - headBytes);
      this.onEnd({ mount, bytes, openedAt: closedAt - Math.max(0, duration), closedAt });
    }
    this.onPresence?.({ mount, present: false });
  }

  /** HAProxy died: every source it carried is gone (their exact bytes with it). */
  allGone(): void {
    const mounts = [...this.live.values()];
    this.live.clear();
    for (const mount of mounts) this.onPresence?.({ mount, present: false });
  }

  clear(): void {
    this.live.clear();
    this.early.clear();
  }

  private rememberEarly(id: string): void {
    if (!/^[0-9a-f-]{36}$/.test(id)) return;
    const now = Date.now();
    for (const [key, at] of this.early)
      if (now - at > EARLY_END_MS || this.early.size >= MAX_EARLY_ENDS) this.early.delete(key);
    this.early.set(id, now);
  }
}
