/** How deep a request body may nest; the API's own documents nest four levels at most. */
export const MAX_DEPTH = 32;

/**
 * The first reason this parsed JSON cannot be stored or processed safely, or undefined: nesting deeper than
 * MAX_DEPTH (recursion in validators and encoders), or a string PostgreSQL cannot hold (NUL) or that is not
 * well-formed Unicode (a lone surrogate). Iterative, so hostile depth cannot overflow the stack here.
 */
export function unsafeJson(value: unknown): string | undefined {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [current, depth] = stack.pop()!;
    if (typeof current === 'string') {
      if (current.includes('\u0000') || !current.isWellFormed())
        return 'a string contains a NUL character or an unpaired surrogate';
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    if (depth >= MAX_DEPTH) return `the JSON nests deeper than ${MAX_DEPTH} levels`;
    for (const [key, child] of Object.entries(current)) {
      if (!Array.isArray(current)) stack.push([key, depth + 1]);
      stack.push([child, depth + 1]);
    }
  }
  return undefined;
}
