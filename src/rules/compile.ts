import type { Diagnostic, SourceFile } from '../catalog/source.js';
import { schemaProblems } from '../schema/ajv.js';
import { cachedValidator } from '../schema/validator-cache.js';
import { knownOperators } from './operators.js';
import { ruleDocumentSchema } from './schema.js';
import { Stage } from './stage.js';
import type { DerivedFactSpec, RuleDocument, RuleSpec } from './types.js';

const documentValidator = cachedValidator<RuleDocument>(ruleDocumentSchema);

const baseFacts = {
  product: ['product', 'settings'],
  quote: ['product', 'settings', 'params', 'billing'],
  lifecycle: ['service', 'usage', 'product', 'settings'],
  // What one buyer already holds (per API key, per paying address), what an order adds, how full the host is and what
  // the paying wallet has paid before: see src/orders/buyer-limits.ts.
  buyer: ['product', 'settings', 'demand', 'key', 'payer', 'host', 'history'],
  // A refund: the service and why it ended, the money received for it and what it used (see src/pricing/refund.ts).
  refund: ['product', 'settings', 'refund', 'paid', 'usage'],
};
type StageName = keyof typeof baseFacts;

/**
 * Base facts with a few possible values (the billing enum): rules reading only these, derived facts (each an item of a
 * catalog list, or null) and the snapshot are decided once per value (see DecidedRules).
 */
const keyFacts: Partial<Record<StageName, string[]>> = { quote: ['billing'] };

export type CompiledRules = Record<StageName, Stage>;

/** Validates rule files and builds one Stage per stage; errors name file:line:column. */
export function compileRules(files: SourceFile[]): { rules?: CompiledRules; diagnostics: Diagnostic[] } {
  const diagnostics: Diagnostic[] = [];
  const validateDocument = documentValidator();
  const collected = Object.fromEntries(
    Object.keys(baseFacts).map((stage) => [stage, { rules: [] as RuleSpec[], derived: [] as DerivedFactSpec[] }]),
  ) as Record<StageName, { rules: RuleSpec[]; derived: DerivedFactSpec[] }>;
  const ruleNames = new Map<string, string>();

  const documents: { file: SourceFile; doc: RuleDocument }[] = [];
  for (const file of files) {
    if (file.syntaxErrors.length) {
      diagnostics.push(...file.syntaxErrors);
      continue;
    }
    if (validateDocument(file.value)) {
      documents.push({ file, doc: file.value as RuleDocument });
      continue;
    }
    for (const p of schemaProblems(validateDocument.errors))
      diagnostics.push(file.at(p.pointer, p.message, p.atKey ? 'key' : 'value'));
  }
  const factsOf = (stage: StageName) =>
    new Set([
      ...baseFacts[stage],
      ...documents.filter((d) => d.doc.stage === stage).flatMap((d) => (d.doc.derived_facts ?? []).map((f) => f.name)),
    ]);

  for (const { file, doc } of documents) {
    const stage = collected[doc.stage];
    const facts = factsOf(doc.stage);
    (doc.derived_facts ?? []).forEach((d, i) => {
      (d.where ?? []).forEach((w, j) => {
        if (!knownOperators.has(w.operator))
          diagnostics.push(file.at(`/derived_facts/${i}/where/${j}/operator`, `unknown operator ${w.operator}`));
      });
      if (!facts.has(d.from.split('.')[0]))
        diagnostics.push(file.at(`/derived_facts/${i}/from`, `unknown fact ${d.from.split('.')[0]}`));
      stage.derived.push(d);
    });
    doc.rules.forEach((rule, i) => {
      const previous = ruleNames.get(rule.name);
      if (previous)
        diagnostics.push(file.at(`/rules/${i}/name`, `rule name ${rule.name} is already used in ${previous}`));
      ruleNames.set(rule.name, file.path);
      checkConditions(rule.conditions, `/rules/${i}/conditions`, facts, file, diagnostics);
      checkFactRefs(rule.event.params, `/rules/${i}/event/params`, facts, file, diagnostics);
      if (
        (rule.event.type === 'price_line' || rule.event.type === 'refund_line') &&
        'rate' in rule.event.params === 'rate_atomic' in rule.event.params
      ) {
        diagnostics.push(
          file.at(
            `/rules/${i}/event/params`,
            `a ${rule.event.type} needs exactly one of rate_atomic (atomic units) and rate (whole currency units)`,
          ),
        );
      }
      stage.rules.push(rule);
    });
  }
  if (diagnostics.length) return { diagnostics };
  return {
    diagnostics,
    rules: Object.fromEntries(
      Object.entries(collected).map(([stage, c]) => [
        stage,
        new Stage(c.rules, c.derived, {
          keyFacts: [...(keyFacts[stage as StageName] ?? []), ...c.derived.map((d) => d.name)],
        }),
      ]),
    ) as CompiledRules,
  };
}

function checkConditions(
  node: unknown,
  pointer: string,
  facts: Set<string>,
  file: SourceFile,
  out: Diagnostic[],
): void {
  const c = node as Record<string, unknown>;
  for (const key of ['all', 'any'] as const) {
    if (Array.isArray(c[key]))
      (c[key] as unknown[]).forEach((child, i) => checkConditions(child, `${pointer}/${key}/${i}`, facts, file, out));
  }
  if (c.not) checkConditions(c.not, `${pointer}/not`, facts, file, out);
  if (typeof c.fact === 'string') {
    if (!facts.has(c.fact))
      out.push(file.at(`${pointer}/fact`, `unknown fact ${c.fact}; known here: ${[...facts].join(', ')}`));
    if (!knownOperators.has(String(c.operator)))
      out.push(
        file.at(`${pointer}/operator`, `unknown operator ${c.operator}; known: ${[...knownOperators].join(', ')}`),
      );
  }
}

function checkFactRefs(
  params: Record<string, unknown>,
  pointer: string,
  facts: Set<string>,
  file: SourceFile,
  out: Diagnostic[],
): void {
  for (const [key, value] of Object.entries(params)) {
    const ref = value as { fact?: unknown } | null;
    if (ref && typeof ref === 'object' && typeof ref.fact === 'string' && !facts.has(ref.fact)) {
      out.push(file.at(`${pointer}/${key}/fact`, `unknown fact ${ref.fact}`));
    }
    if (typeof value === 'string') {
      for (const m of value.matchAll(/\$\{([a-z_]+)/gi)) {
        if (!facts.has(m[1])) out.push(file.at(`${pointer}/${key}`, `message refers to unknown fact ${m[1]}`));
      }
    }
  }
}
