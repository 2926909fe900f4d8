import type { Catalog, Diagnostic, SourceFile } from '../catalog/index.js';
import { atomicToAmount, Decimal } from '../rules/index.js';
import { decimalsOf } from './snapshot-shape.js';

/** A term of a product's human formula text: "duration_hours x 0.02 USDC". */
const term = /([a-z][a-z0-9_]*)\s*[x×*]\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Z]{3,5})/g;

/**
 * The formula text agents read must say what the rates charge. Which rate prices which parameter is read from the
 * price rules: a price_line whose quantity is a parameter and whose rate_atomic is a field of the product's pricing.
 */
export function checkFormulaText(catalog: Catalog, sources: SourceFile[]): Diagnostic[] {
  const rateOf = ratesByParameter(sources.filter((s) => s.path.startsWith('rules/')));
  const diagnostics: Diagnostic[] = [];
  for (const entry of catalog.products) {
    const pricing = entry.product.pricing;
    if (typeof pricing.formula !== 'string') continue;
    const source = sources.find((s) => s.path === entry.file)!;
    const problem = (message: string) =>
      diagnostics.push(source.at('/pricing/formula', message, 'value', 'formula_mismatch'));
    const mentioned = new Set<string>();
    for (const [, parameter, amount, currency] of pricing.formula.matchAll(term)) {
      mentioned.add(parameter);
      const field = rateOf.get(parameter);
      const rate = field === undefined ? undefined : pricing[field];
      if (field === undefined || typeof rate !== 'string') {
        problem(
          `the formula charges ${parameter} x ${amount} ${currency}, but no rate of this product prices ` +
            `${parameter}: remove the term or add the rate`,
        );
        continue;
      }
      const charged = atomicToAmount(rate, decimalsOf(entry));
      if (currency !== pricing.currency || !new Decimal(amount).equals(charged)) {
        problem(
          `the formula says ${parameter} x ${amount} ${currency}, but pricing.${field} "${rate}" charges ` +
            `${charged} ${pricing.currency}: make the text say ${parameter} x ${charged} ${pricing.currency}, ` +
            `or change the rate`,
        );
      }
    }
    for (const [parameter, field] of rateOf) {
      if (typeof pricing[field] === 'string' && parameter in entry.acceptedParameters && !mentioned.has(parameter)) {
        problem(
          `pricing.${field} charges for ${parameter}, but the formula does not say so: add (${parameter} x ` +
            `${atomicToAmount(pricing[field] as string, decimalsOf(entry))} ${pricing.currency})`,
        );
      }
    }
  }
  return diagnostics;
}

function ratesByParameter(ruleSources: SourceFile[]): Map<string, string> {
  const rates = new Map<string, string>();
  for (const source of ruleSources) {
    const document = source.value as
      | { rules?: { event?: { type?: string; params?: Record<string, unknown> } }[] }
      | undefined;
    for (const rule of document?.rules ?? []) {
      if (rule.event?.type !== 'price_line') continue;
      const quantity = rule.event.params?.quantity as { fact?: string; path?: string } | undefined;
      const rate = rule.event.params?.rate_atomic as { fact?: string; path?: string } | undefined;
      if (
        quantity?.fact === 'params' &&
        quantity.path &&
        rate?.fact === 'product' &&
        rate.path?.startsWith('pricing.')
      ) {
        rates.set(quantity.path, rate.path.slice('pricing.'.length));
      }
    }
  }
  return rates;
}
