/** A satisfiable byte range of a file: first and last byte, inclusive. */
export interface ByteRange {
  start: number;
  end: number;
}

/**
 * The one range a Range header asks of a file of `size` bytes (RFC 9110 14.1.2): undefined when there is no header
 * or it is not a single bytes range we serve (the whole file is sent), 'unsatisfiable' when it lies past the end.
 */
export function byteRangeOf(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | undefined {
  const match = header ? /^bytes=(\d*)-(\d*)$/.exec(header.trim()) : null;
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(match[1]);
  const end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  if (start >= size) return 'unsatisfiable';
  if (end < start) return undefined;
  return { start, end };
}
