import { Ajv2020 } from 'ajv/dist/2020.js';
import standalone from 'ajv/dist/standalone/index.js';
import { ruleDocumentSchema } from '../src/rules/schema.ts';
import { productFileSchema, catalogFileSchema } from '../src/catalog/schemas.ts';
const ajv = new Ajv2020({ strict: true, validateSchema: false, allErrors: true, code: { source: true, esm: true } });
ajv.addSchema(ruleDocumentSchema, 'rule-document').addSchema(productFileSchema, 'product-file').addSchema(catalogFileSchema, 'catalog-file');
const code = standalone.default(ajv, { validateRuleDocument: 'rule-document', validateProductFile: 'product-file', validateCatalogFile: 'catalog-file' });
process.stdout.write(code);
