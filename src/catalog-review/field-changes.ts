import { isDeepStrictEqual } from 'node:util';

export interface FieldChange {
  pointer: string;
  before?: unknown;
  after?: unknown;
}

/**
 * The leaves that differ between two parsed documents, as JSON pointers; a value that appears or disappears has no
 * before or after.
 */
export function fieldChanges(before: unknown, after: unknown, pointer = ''): FieldChange[] {
  if (isDeepStrictEqual(before, after)) return [];
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    return keys.flatMap((k) =>
      fieldChanges(before[k], after[k], `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`),
    );
  }
  return [{ pointer: pointer || '/', ...(before !== undefined && { before }), ...(after !== undefined && { after }) }];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
