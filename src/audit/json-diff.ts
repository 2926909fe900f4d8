export interface Difference {
  path: string;
  recorded: unknown;
  replayed: unknown;
}

/** Where two JSON values differ, as JSON paths ($.output.total_atomic) with both values; empty when equal. */
export function jsonDiff(
  recorded: unknown,
  replayed: unknown,
  path = '$',
  out: Difference[] = [],
  limit = 50,
): Difference[] {
  if (out.length >= limit) return out;
  const bothObjects =
    recorded !== null &&
    replayed !== null &&
    typeof recorded === 'object' &&
    typeof replayed === 'object' &&
    Array.isArray(recorded) === Array.isArray(replayed);
  if (!bothObjects) {
    if (JSON.stringify(recorded) !== JSON.stringify(replayed)) out.push({ path, recorded, replayed });
    return out;
  }
  if (Array.isArray(recorded) && Array.isArray(replayed)) {
    for (let i = 0; i < Math.max(recorded.length, replayed.length); i++)
      jsonDiff(recorded[i], replayed[i], `${path}[${i}]`, out, limit);
    return out;
  }
  const a = recorded as Record<string, unknown>;
  const b = replayed as Record<string, unknown>;
  for (const key of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
    jsonDiff(
      a[key],
      b[key],
      /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`,
      out,
      limit,
    );
  }
  return out;
}
