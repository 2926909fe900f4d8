import { AuditLog } from '../../audit/index.js';
import { formatDiagnostic, type Diagnostic } from '../../catalog/index.js';
import { LiveSnapshot } from '../../catalog/live-snapshot.js';
import type { Logger } from '../../log/index.js';
import type { Database } from '../../store/index.js';
import type { Config } from '../config.js';
import type { Shutdown } from '../shutdown.js';

/** The catalog and rules being served, reloaded on edit; every version is kept for the audit trail. */
export async function startCatalog(config: Config, log: Logger, db: Database, shutdown: Shutdown) {
  const live = await LiveSnapshot.open(config.catalogDir, config.rulesDir);
  shutdown.push(async () => live.close());
  const audit = new AuditLog(db);
  await audit.saveSnapshot(live.current);
  live.on('reloaded', (snapshot) => {
    log.info({ content_hash: snapshot.hash }, 'catalog reloaded');
    audit.saveSnapshot(snapshot).catch((err) => log.error({ err }, 'could not store the reloaded snapshot'));
  });
  live.on('rejected', (diagnostics: Diagnostic[]) => {
    const errors = diagnostics.map(formatDiagnostic);
    log.warn({ errors }, 'catalog edit rejected; still serving the last good version');
  });
  await live.watch({ checkIntervalMs: config.catalogCheckIntervalMs });
  return { live, audit };
}
