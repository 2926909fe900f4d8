import { replacePlaylist, type ServiceRow } from '../services/index.js';
import type { OperationDeps } from './operation-deps.js';

/** Sets the AutoDJ playlist of a service to files already uploaded. */
export async function setPlaylist(deps: OperationDeps, service: ServiceRow, playlist: string[], shuffle?: boolean) {
  const updated = await replacePlaylist(deps.services!, deps.media, service, playlist, shuffle);
  return { ok: true as const, playlist: updated.playlist, shuffle: updated.shuffle };
}
