// Writes schemas/*.schema.json from the schemas the service validates catalog files with (npx tsx scripts/generate-schemas.ts).
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publishedSchemas, schemaText } from '../src/catalog/index.js';

const dir = fileURLToPath(new URL('../schemas/', import.meta.url));
await mkdir(dir, { recursive: true });
for (const [file, schema] of Object.entries(publishedSchemas())) {
  await writeFile(join(dir, file), schemaText(schema));
  process.stdout.write(`wrote schemas/${file}\n`);
}
