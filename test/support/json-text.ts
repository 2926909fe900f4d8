/**
 * JSON documents as trees that can say what JSON.stringify cannot: duplicate keys, "__proto__" as an ordinary key,
 * and number literals exactly as written ("1e-400", "-0", "123456789012345678901234567890"), or text that is not JSON at all.
 * Used to build near-valid request bodies: a valid body with one node changed.
 */

/** An object as its list of members, in order; keys may repeat. */
export class Obj {
  constructor(readonly pairs: [string, JsonNode][]) {}
}

/** Text written into the document as is (a number literal, a deep nesting, or deliberately broken JSON). */
export class Raw {
  constructor(readonly text: string) {}
}

export type JsonNode = null | boolean | number | string | JsonNode[] | Obj | Raw;
/** Steps from the root: for an object the index of the member, for an array the index of the element. */
export type JsonPath = number[];

export function fromJs(value: unknown): JsonNode {
  if (value === null || value === undefined) return null;
  if (typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : new Raw(String(value));
  if (value instanceof Obj || value instanceof Raw) return value;
  if (Array.isArray(value)) return value.map(fromJs);
  if (typeof value === 'object')
    return new Obj(Object.keys(value).map((k) => [k, fromJs((value as Record<string, unknown>)[k])]));
  return String(value);
}

export function toText(node: JsonNode): string {
  if (node instanceof Raw) return node.text;
  if (node instanceof Obj) return `{${node.pairs.map(([k, v]) => `${JSON.stringify(k)}:${toText(v)}`).join(',')}}`;
  if (Array.isArray(node)) return `[${node.map(toText).join(',')}]`;
  if (typeof node === 'number') return Object.is(node, -0) ? '-0' : JSON.stringify(node);
  return JSON.stringify(node);
}

/** Every node with its path, the root first. */
export function allPaths(
  node: JsonNode,
  path: JsonPath = [],
  out: { path: JsonPath; node: JsonNode }[] = [],
): { path: JsonPath; node: JsonNode }[] {
  out.push({ path, node });
  if (node instanceof Obj) node.pairs.forEach(([, v], i) => allPaths(v, [...path, i], out));
  else if (Array.isArray(node)) node.forEach((v, i) => allPaths(v, [...path, i], out));
  return out;
}

/** A copy with the node at path replaced by what change returns; undefined removes it (not the root). */
export function changeAt(
  node: JsonNode,
  path: JsonPath,
  change: (old: JsonNode, key: string | undefined) => JsonNode | undefined,
  key?: string,
): JsonNode {
  if (path.length === 0) return change(node, key) ?? null;
  const [step, ...rest] = path;
  if (node instanceof Obj) {
    const pairs: [string, JsonNode][] = [];
    node.pairs.forEach(([k, v], i) => {
      if (i !== step) {
        pairs.push([k, v]);
        return;
      }
      if (rest.length === 0) {
        const next = change(v, k);
        if (next !== undefined) pairs.push([k, next]);
      } else {
        pairs.push([k, changeAt(v, rest, change, k)]);
      }
    });
    return new Obj(pairs);
  }
  if (Array.isArray(node)) {
    const items: JsonNode[] = [];
    node.forEach((v, i) => {
      if (i !== step) {
        items.push(v);
        return;
      }
      if (rest.length === 0) {
        const next = change(v, undefined);
        if (next !== undefined) items.push(next);
      } else {
        items.push(changeAt(v, rest, change));
      }
    });
    return items;
  }
  return node;
}

/** A copy with the member key: value added to the object at path (after the existing ones, so a repeated key wins). */
export function addMember(node: JsonNode, path: JsonPath, key: string, value: JsonNode): JsonNode {
  return changeAt(node, path, (old) => (old instanceof Obj ? new Obj([...old.pairs, [key, value]]) : old));
}

/** A copy with the member key: value added to every object in the document, the root included. */
export function addMemberEverywhere(node: JsonNode, key: string, value: JsonNode): JsonNode {
  if (node instanceof Obj)
    return new Obj([
      ...node.pairs.map(([k, v]): [string, JsonNode] => [k, addMemberEverywhere(v, key, value)]),
      [key, value],
    ]);
  if (Array.isArray(node)) return node.map((v) => addMemberEverywhere(v, key, value));
  return node;
}

/** The key of the member at path, when the last step is an object member. */
export function keyAt(node: JsonNode, path: JsonPath): string | undefined {
  let current: JsonNode = node;
  let key: string | undefined;
  for (const step of path) {
    if (current instanceof Obj) {
      key = current.pairs[step]?.[0];
      current = current.pairs[step]?.[1] ?? null;
    } else if (Array.isArray(current)) {
      key = undefined;
      current = current[step] ?? null;
    } else return undefined;
  }
  return key;
}

/** n levels of nesting around a leaf, built as text (a recursive serializer would overflow on it). */
export function deepNesting(depth: number, shape: 'array' | 'object' | 'mixed', leaf = '1'): Raw {
  if (shape === 'array') return new Raw('['.repeat(depth) + leaf + ']'.repeat(depth));
  if (shape === 'object') return new Raw('{"a":'.repeat(depth) + leaf + '}'.repeat(depth));
  const half = Math.floor(depth / 2);
  return new Raw('[{"a":'.repeat(half) + leaf + '}]'.repeat(half));
}

/** The path of the member reached by these keys (the last member with each key), if there is one. */
export function memberPath(node: JsonNode, keys: string[]): JsonPath | undefined {
  const path: JsonPath = [];
  let current: JsonNode = node;
  for (const key of keys) {
    if (!(current instanceof Obj)) return undefined;
    let index = -1;
    current.pairs.forEach(([k], i) => {
      if (k === key) index = i;
    });
    if (index < 0) return undefined;
    path.push(index);
    current = current.pairs[index][1];
  }
  return path;
}
