import { Engine, type EngineResult } from 'json-rules-engine';
import { compareDecimal, decimalOperators } from './operators.js';
import { readPath } from './path.js';
import type { RuleSpec } from './types.js';

/**
 * Engines built once per snapshot and lent to one run at a time: overlapping runs on one Engine share its
 * status flag, and a run that finishes first makes the other skip its remaining rules.
 */
export class EnginePool {
  private readonly idle: Engine[] = [];

  constructor(private readonly rules: RuleSpec[]) {}

  async run(facts: Record<string, unknown>): Promise<EngineResult> {
    const engine = this.idle.pop() ?? this.build();
    try {
      return await engine.run(facts);
    } finally {
      this.idle.push(engine);
    }
  }

  private build(): Engine {
    const engine = new Engine([], {
      allowUndefinedFacts: true,
      replaceFactsInEventParams: true,
      pathResolver: readPath,
    });
    for (const name of decimalOperators)
      engine.addOperator(name, (a: unknown, b: unknown) => compareDecimal(name, a, b));
    for (const rule of this.rules) engine.addRule({ ...rule, priority: 1 } as never);
    return engine;
  }
}
