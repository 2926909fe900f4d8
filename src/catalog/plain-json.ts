/**
 * The value of a JSON text when reading it with JSON.parse gives what the YAML parser gives (undefined otherwise, and
 * the caller parses it as YAML): it parses, no object repeats a key (JSON.parse keeps the last, the YAML parser
 * reports it), no key is `__proto__` or longer than YAML allows an implicit key.
 */
export function plainJson(text: string): { value: unknown } | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return keysAreUnique(text) ? { value } : undefined;
}

const longestKey = 1000; // YAML refuses implicit keys over 1024 characters

/** Whether each object of this (valid) JSON text names each key once; false also for keys to leave to YAML. */
function keysAreUnique(text: string): boolean {
  // One entry per open bracket: the keys of an object so far, or none for an array.
  const objects: (Set<string> | undefined)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const end = stringEnd(text, i);
      const keys = objects[objects.length - 1];
      if (expectKey && keys) {
        const key = JSON.parse(text.slice(i, end + 1)) as string;
        if (keys.has(key) || key === '__proto__' || key.length > longestKey) return false;
        keys.add(key);
      }
      expectKey = false;
      i = end;
    } else if (c === '{') {
      objects.push(new Set());
      expectKey = true;
    } else if (c === '[') {
      objects.push(undefined);
    } else if (c === '}' || c === ']') {
      objects.pop();
    } else if (c === ',') {
      expectKey = objects[objects.length - 1] !== undefined;
    }
  }
  return true;
}

/** The index of the quote that closes the string opening at `start`. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
  return i;
}
