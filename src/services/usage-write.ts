/**
 * How stale a service's usage row may grow while its figures only grow steadily (listeners held, a source sending):
 * the row is rewritten at least this often then. Readers see measured_at as the host's last pass (usage_passes).
 */
export const USAGE_REFRESH_MS = 30_000;

type Usage = Record<string, unknown>;

/**
 * A total (bytes, listener-hours) that grew by more than this share of what the row holds is written at once: a young
 * stream's figures are shown close behind, an old one's within USAGE_REFRESH_MS.
 */
export const USAGE_GROWTH_SHOWN = 0.1;

/** Figures that grow on their own while the service streams, with what makes each grow and whether it is a total. */
const GROWING: Array<[path: string, driven: (u: Usage) => boolean, total: boolean]> = [
  ['listener_hours', listened, true],
  ['bytes_sent', listened, true],
  ['transfer_used_gb', listened, true],
  ['bytes_read', sourced, true],
  ['source_kbps', sourced, false],
  ['source_budget.remaining_bytes', () => true, false],
  ['source_budget.state.level', () => true, false],
  ['source_budget.state.bytesRead', sourced, true],
];
const GROWING_PATHS = new Set(GROWING.map(([path]) => path));

function listened(u: Usage): boolean {
  return Number(u.listeners ?? 0) > 0;
}

function sourced(u: Usage): boolean {
  return u.source_connected === true;
}

/**
 * Whether a pass rewrites a service's usage row (each rewrite is a new row version and WAL): when what a reader sees
 * changed, not every time a held listener's bytes or a live source's grew. Written at once when a figure other than
 * the growing ones changed (listeners, peak, source connected or since, over bitrate, refused until…), when a growing
 * figure changed while nothing makes it grow (the last bytes of listeners who left, of a source that ended), went
 * from or to zero, or a total grew by more than USAGE_GROWTH_SHOWN; else at most every USAGE_REFRESH_MS (the bitrate
 * budget's level included: whether the source is over, and until when it is refused, are written at once).
 */
export function usageWorthWriting(stored: Usage | null | undefined, next: Usage, now = Date.now()): boolean {
  if (!stored) return true;
  if (!sameValue(stored, next, '', (path) => path === 'measured_at' || GROWING_PATHS.has(path))) return true;
  let grew = false;
  for (const [path, driven, total] of GROWING) {
    const [was, is] = [valueAt(stored, path), valueAt(next, path)];
    if (sameValue(was, is, path, () => false)) continue;
    if (!driven(stored) && !driven(next)) return true;
    if (isZero(was) !== isZero(is)) return true;
    if (total && Math.abs(Number(is) - Number(was)) > USAGE_GROWTH_SHOWN * Math.abs(Number(was))) return true;
    grew = true;
  }
  const writtenAt = Date.parse(String(stored.measured_at));
  return grew && !(now - writtenAt < USAGE_REFRESH_MS);
}

function isZero(value: unknown): boolean {
  return value === null || value === undefined || Number(value) === 0;
}

function valueAt(usage: Usage, path: string): unknown {
  let value: unknown = usage;
  for (const key of path.split('.')) value = (value as Usage | undefined)?.[key];
  return value;
}

/**
 * Deep equality of JSON values whatever the order of their keys (jsonb does not keep it), less the ignored paths and
 * the budget's own time of observation (a full budget refills to the same level from any earlier time; any other
 * level changes).
 */
function sameValue(a: unknown, b: unknown, path: string, ignored: (path: string) => boolean): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    const at = path ? `${path}.${key}` : key;
    if (ignored(at) || at === 'source_budget.state.at') continue;
    if (!sameValue((a as Usage)[key], (b as Usage)[key], at, ignored)) return false;
  }
  return true;
}
