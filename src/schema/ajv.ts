import { _, Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

export type { ValidateFunction };

/**
 * Every schema in the service is compiled by one strictly configured Ajv (JSON Schema 2020-12). They are the service's
 * own (the catalog's parameter schemas are built from descriptors that the product file schema checked, with
 * file:line:column): strict mode still refuses unknown keywords and keyword values of the wrong type at compile time;
 * checking each against the meta-schema as well (compiling the meta-schema, about 0.1 s of CPU per Ajv, in every
 * process) is left to test/schema-meta.test.ts, which checks every schema the service compiles.
 */
export function createAjv(options: { useDefaults?: boolean; keepSource?: boolean } = {}) {
  const ajv = new Ajv2020({
    strict: true,
    validateSchema: false,
    allErrors: true,
    useDefaults: options.useDefaults ?? false,
    coerceTypes: false,
    // The generated code kept for validator-cache.ts (standalone), which must name the formats' module to use them.
    ...(options.keepSource && { code: { source: true, formats: _`require("ajv-formats/dist/formats").fullFormats` } }),
  });
  addFormats.default(ajv);
  return ajv;
}

export interface SchemaProblem {
  /** JSON pointer of the value that is wrong (for a missing or unknown property, the property itself). */
  pointer: string;
  /** Whether the problem is about the key (unknown property) rather than the value. */
  atKey: boolean;
  code: string;
  message: string;
}

/** Ajv errors as one problem per wrong place, with the noise of oneOf branches removed. */
export function schemaProblems(errors: ErrorObject[] | null | undefined): SchemaProblem[] {
  const all = errors ?? [];
  const specific = all.filter((e) => e.keyword !== 'oneOf' && e.keyword !== 'anyOf' && e.keyword !== 'if');
  const chosen = specific.length ? specific : all;
  const seen = new Set<string>();
  const problems: SchemaProblem[] = [];
  for (const e of chosen) {
    const problem = toProblem(e);
    const key = `${problem.pointer}|${problem.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    problems.push(problem);
  }
  return problems;
}

function toProblem(e: ErrorObject): SchemaProblem {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return {
        pointer: `${e.instancePath}/${escape(String(p.missingProperty))}`,
        atKey: true,
        code: 'required',
        message: `${p.missingProperty} is required`,
      };
    case 'additionalProperties':
      return {
        pointer: `${e.instancePath}/${escape(String(p.additionalProperty))}`,
        atKey: true,
        code: 'unknown_property',
        message: `${p.additionalProperty} is not allowed here`,
      };
    case 'enum':
      return {
        pointer: e.instancePath,
        atKey: false,
        code: 'enum',
        message: `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`,
      };
    default:
      return { pointer: e.instancePath, atKey: false, code: e.keyword, message: e.message ?? 'is invalid' };
  }
}

function escape(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}
