const splitCache = new Map<string, string[]>();

/**
 * Reads a dotted path ("pricing.base_atomic"); json-rules-engine's default JSONPath resolver costs about twice as much.
 */
export function readPath(value: unknown, path: string): unknown {
  let segments = splitCache.get(path);
  if (!segments) {
    segments = path === '' ? [] : path.replace(/^\$\.?/, '').split('.');
    splitCache.set(path, segments);
  }
  let current = value;
  for (const segment of segments) {
    if (current === null || typeof current !== 'object' || !Object.prototype.hasOwnProperty.call(current, segment))
      return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}
