import { isDeepStrictEqual } from 'node:util';
import { SourceFile } from '../catalog/index.js';
import type { SnapshotFiles } from '../pricing/index.js';

export interface RuleChange {
  rule: string;
  file: string;
  change: 'added' | 'removed' | 'changed';
}

/** Rules (by name) added, removed or changed between two versions of rules/. */
export function ruleChanges(before: SnapshotFiles, after: SnapshotFiles): RuleChange[] {
  const old = rulesByName(before);
  const now = rulesByName(after);
  const changes: RuleChange[] = [];
  for (const [name, rule] of now) {
    const previous = old.get(name);
    if (!previous) changes.push({ rule: name, file: rule.file, change: 'added' });
    else if (!isDeepStrictEqual(previous.definition, rule.definition))
      changes.push({ rule: name, file: rule.file, change: 'changed' });
  }
  for (const [name, rule] of old) if (!now.has(name)) changes.push({ rule: name, file: rule.file, change: 'removed' });
  return changes;
}

function rulesByName(files: SnapshotFiles): Map<string, { file: string; definition: unknown }> {
  const rules = new Map<string, { file: string; definition: unknown }>();
  for (const [path, text] of Object.entries(files)) {
    if (!path.startsWith('rules/')) continue;
    const document = new SourceFile(path, text).value as
      | { derived_facts?: { name: string }[]; rules?: { name: string }[] }
      | undefined;
    for (const rule of document?.rules ?? []) rules.set(rule.name, { file: path, definition: rule });
    for (const fact of document?.derived_facts ?? [])
      rules.set(`derived fact ${fact.name}`, { file: path, definition: fact });
  }
  return rules;
}
