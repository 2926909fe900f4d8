import assert from 'node:assert/strict';
import { test } from 'node:test';
import { commandHelp, usage } from '../src/cli/help.js';

test('the overview (`agent-audio --help`) lists every command with the synopsis of its own help', () => {
  const overview = usage.split('\n').map((line) => line.trim());
  for (const [name, help] of Object.entries(commandHelp)) {
    const synopsis = help.split('\n')[0].replace(/^usage: agent-audio /, '');
    assert.ok(synopsis.startsWith(name), `${name}: its help starts with its own name`);
    assert.ok(
      overview.some((line) => line === synopsis || line.startsWith(`${synopsis} `)),
      `${name} is missing from the overview`,
    );
  }
});
