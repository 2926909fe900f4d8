import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const versionOf = (name: string) => (require(`${name}/package.json`) as { version: string }).version;

/** The code an evaluation ran on, stored with every record so a replay on other versions can be spotted. */
export const evaluatorVersions = Object.freeze({
  evaluator: '1',
  'json-rules-engine': versionOf('json-rules-engine'),
  'decimal.js': versionOf('decimal.js'),
  ajv: versionOf('ajv'),
  yaml: versionOf('yaml'),
});
