import { randomFillSync } from 'node:crypto';

const pool = Buffer.alloc(4096);
let offset = pool.length;

/**
 * An unguessable id: prefix + base64url of `bytes` random bytes. Random bytes are drawn from the OS
 * 4 KiB at a time, since one system call per id showed up in request profiles.
 */
export function randomId(prefix: string, bytes = 16): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const id = pool.toString('base64url', offset, offset + bytes);
  offset += bytes;
  return `${prefix}${id}`;
}
