import { readFileSync } from 'node:fs';

/**
 * When we are root: the ids of the system user a server we start runs as (undefined: run as ourselves). Debian's
 * packages create their users (icecast2, haproxy, www-data) in /etc/passwd.
 */
export function systemUserIds(user: string): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  let passwd: string;
  try {
    passwd = readFileSync('/etc/passwd', 'utf8');
  } catch {
    return undefined;
  }
  for (const line of passwd.split('\n')) {
    const [name, , uid, gid] = line.split(':');
    if (name === user && /^\d+$/.test(uid ?? '') && /^\d+$/.test(gid ?? ''))
      return { uid: Number(uid), gid: Number(gid) };
  }
  return undefined;
}
