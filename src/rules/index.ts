export { compileRules, type CompiledRules } from './compile.js';
export { Stage, RuleEvaluationError } from './stage.js';
export { Decimal, toDecimal, plain, atomicToAmount } from './decimal.js';
export type {
  PriceLine,
  Rejection,
  NotOrderableReason,
  StageOutcome,
  TraceEntry,
  ServiceDecision,
  ServiceAction,
} from './types.js';
export { readPath } from './path.js';
export { compareDecimal, decimalOperators } from './operators.js';
