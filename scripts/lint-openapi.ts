// npm run lint:openapi: writes the OpenAPI document the service serves (from catalog/ and rules/ on disk, offline)
// and lints it with Redocly's recommended rules. Exit status: Redocly's (non-zero on any error).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildOpenApiDocument } from '../src/http/openapi.js';
import { billingOptions, openSnapshot, readSnapshotFiles } from '../src/pricing/index.js';

const root = fileURLToPath(new URL('../', import.meta.url));
const { snapshot, diagnostics } = await openSnapshot(
  readSnapshotFiles(process.env.CATALOG_DIR ?? join(root, 'catalog'), process.env.RULES_DIR ?? join(root, 'rules')),
);
if (!snapshot) {
  process.stderr.write(`the catalog does not load: ${JSON.stringify(diagnostics.slice(0, 3))}\n`);
  process.exit(1);
}
const dir = mkdtempSync(join(tmpdir(), 'openapi-lint-'));
const file = join(dir, 'openapi.json');
writeFileSync(file, JSON.stringify(buildOpenApiDocument(snapshot, 'lint', await billingOptions(snapshot)), null, 2));
const lint = spawnSync(
  join(root, 'node_modules/.bin/redocly'),
  ['lint', '--extends', 'recommended', '--format', process.argv.includes('--json') ? 'json' : 'codeframe', file],
  { stdio: 'inherit' },
);
rmSync(dir, { recursive: true, force: true });
process.exit(lint.status ?? 1);
