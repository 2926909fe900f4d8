import { createHash } from 'node:crypto';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import standaloneCode from 'ajv/dist/standalone/index.js';
import { createAjv, type ValidateFunction } from './ajv.js';

const require = createRequire(import.meta.url);
const ajvVersion = (require('ajv/package.json') as { version: string }).version;

/** Where compiled validators are kept: beside the other tools' caches, shared by every process of this checkout. */
export const defaultValidatorCache = fileURLToPath(
  new URL('../../node_modules/.cache/agent-audio/validators/', import.meta.url),
);

const ownSchemas: object[] = [];

/** Every schema given to cachedValidator so far (test/schema-meta.test.ts checks each against the meta-schema). */
export function cachedSchemas(): readonly object[] {
  return ownSchemas;
}

/**
 * A validator for one of the service's own schemas, compiled when first asked for and once per machine: Ajv's code for
 * it is kept in `cacheDir`, named by a hash of the schema, Ajv's version and the options, and later processes load it
 * instead of compiling again (the catalog's and the rules' schemas cost about 70 ms of every start and every `catalog
 * check`). A cache that cannot be read or written costs only the compile.
 */
export function cachedValidator<T>(
  schema: object,
  options: { useDefaults?: boolean } = {},
  cacheDir = defaultValidatorCache,
): () => ValidateFunction<T> {
  ownSchemas.push(schema);
  let validate: ValidateFunction<T> | undefined;
  return () => (validate ??= loadOrCompile<T>(schema, options, cacheDir));
}

function loadOrCompile<T>(schema: object, options: { useDefaults?: boolean }, cacheDir: string): ValidateFunction<T> {
  const key = createHash('sha256')
    .update(JSON.stringify([ajvVersion, options, schema]))
    .digest('hex')
    .slice(0, 32);
  const file = join(cacheDir, `${key}.cjs`);
  try {
    return require(file) as ValidateFunction<T>;
  } catch {
    // not compiled on this machine yet, or left unreadable: compiled (and written) again
  }
  const ajv = createAjv({ ...options, keepSource: true });
  const validate = ajv.compile<T>(schema);
  try {
    mkdirSync(cacheDir, { recursive: true });
    writeFileSync(`${file}.${process.pid}`, standaloneCode.default(ajv, validate));
    renameSync(`${file}.${process.pid}`, file); // whole or not at all, whoever writes it first
  } catch {
    // a read-only checkout compiles in every process
  }
  return validate;
}
