// `node scripts/code-shape.mjs [folder]`: the shape limits of the code in src/ (or `folder`) — no function over 80
// lines, no constructor of more than 4 positional parameters (an options object reads better at the call), and at
// most 1 % of lines over 120 characters. Lists what breaks them and exits 1 if anything does.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const MAX_FUNCTION_LINES = 80;
const MAX_POSITIONAL = 4;
const LONG_LINE = 120;
const MAX_LONG_SHARE = 0.01;

const folder = process.argv[2] ?? 'src';
const files = readdirSync(folder, { recursive: true })
  .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
  .map((name) => join(folder, name))
  .sort();

/** A function's name as a reader finds it: its own, its variable's, its property's or its class's method's. */
function nameOf(node) {
  if (ts.isConstructorDeclaration(node)) return `${node.parent.name?.text ?? 'class'}.constructor`;
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && parent.name)
    return parent.name.getText();
  return '(anonymous)';
}

function shapeOf(file) {
  const text = readFileSync(file, 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const problems = [];
  const lineOf = (position) => source.getLineAndCharacterOfPosition(position).line + 1;
  const visit = (node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const lines = lineOf(node.end) - lineOf(node.getStart(source)) + 1;
      const where = `${relative('.', file)}:${lineOf(node.getStart(source))}`;
      if (lines > MAX_FUNCTION_LINES) problems.push(`${where} ${nameOf(node)}: ${lines} lines`);
      if (ts.isConstructorDeclaration(node) && node.parameters.length > MAX_POSITIONAL) {
        problems.push(`${where} ${nameOf(node)}: ${node.parameters.length} positional parameters`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  const lines = text.split('\n');
  return { problems, lines: lines.length, long: lines.filter((line) => line.length > LONG_LINE).length };
}

const shapes = files.map(shapeOf);
const problems = shapes.flatMap((shape) => shape.problems);
const lines = shapes.reduce((sum, shape) => sum + shape.lines, 0);
const long = shapes.reduce((sum, shape) => sum + shape.long, 0);
const share = long / lines;
for (const problem of problems) process.stdout.write(`${problem}\n`);
process.stdout.write(
  `${files.length} files, ${lines} lines, ${long} over ${LONG_LINE} characters (${(share * 100).toFixed(2)} %, ` +
    `at most ${MAX_LONG_SHARE * 100} %)\n`,
);
process.exit(problems.length || share > MAX_LONG_SHARE ? 1 : 0);
