import { LineCounter, parseDocument, isMap, isSeq, isPair, isScalar, type Document, type Node } from 'yaml';
import { plainJson } from './plain-json.js';

export interface Diagnostic {
  file: string;
  line: number;
  column: number;
  message: string;
  /** A stable name of the kind of problem, for editors and CI (e.g. yaml_syntax, type, unknown_property). */
  code?: string;
}

export function formatDiagnostic(d: Diagnostic): string {
  return `${d.file}:${d.line}:${d.column}: ${d.message}`;
}

/** The diagnostic, then the line it points at and a caret under its column (for people at a terminal). */
export function formatDiagnosticWithSource(d: Diagnostic, text: string | undefined): string {
  const line = text?.split('\n')[d.line - 1]?.replace(/\r$/, '');
  if (line === undefined) return formatDiagnostic(d);
  const gutter = `${d.line} | `;
  return `${formatDiagnostic(d)}\n  ${gutter}${line}\n  ${' '.repeat(gutter.length + d.column - 1)}^`;
}

/**
 * A catalog or rules file as text, parsed with positions so errors can name file:line:column. JSON files parse as YAML
 * too; a JSON file that JSON.parse reads without a repeated key (most rules files, most of the time) is read that way,
 * and parsed as YAML, for positions, only when a diagnostic needs one (that parse was most of a service's start).
 */
export class SourceFile {
  readonly value: unknown;
  readonly syntaxErrors: Diagnostic[];
  private positioned?: { document: Document.Parsed; lines: LineCounter };

  constructor(
    readonly path: string,
    readonly text: string,
  ) {
    const json = path.endsWith('.json') ? plainJson(text) : undefined;
    if (json) {
      this.value = json.value;
      this.syntaxErrors = [];
      return;
    }
    const { document } = this.parsed();
    this.syntaxErrors = [...document.errors, ...document.warnings].map((e) => {
      const { line, col } = this.position(e.pos[0]);
      return { file: path, line, column: col, message: e.message.split('\n')[0], code: 'yaml_syntax' };
    });
    this.value = this.syntaxErrors.length ? undefined : document.toJS();
  }

  private parsed(): { document: Document.Parsed; lines: LineCounter } {
    if (!this.positioned) {
      const lines = new LineCounter();
      const document = parseDocument(this.text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
      this.positioned = { document, lines };
    }
    return this.positioned;
  }

  /** Line and column of an offset; an error at the very end of the file is shown at the end of its last line. */
  private position(offset: number): { line: number; col: number } {
    return this.parsed().lines.linePos(Math.min(offset, this.text.trimEnd().length));
  }

  /**
   * Diagnostic at the node a JSON pointer names, or at its key when `at` is 'key'; falls back to the nearest existing
   * parent.
   */
  at(pointer: string, message: string, at: 'value' | 'key' = 'value', code?: string): Diagnostic {
    const segments = pointer
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    const { document, lines } = this.parsed();
    let node: unknown = document.contents;
    let offset = (node as Node | null)?.range?.[0] ?? 0;
    for (const segment of segments) {
      const found = child(node, segment);
      if (!found) break;
      node = found.value;
      offset =
        (at === 'key' && segment === segments[segments.length - 1] ? found.keyOffset : undefined) ??
        (found.value as Node | null)?.range?.[0] ??
        offset;
    }
    const { line, col } = lines.linePos(offset);
    return { file: this.path, line, column: col, message, ...(code && { code }) };
  }
}

function child(node: unknown, segment: string): { value: unknown; keyOffset?: number } | undefined {
  if (isMap(node)) {
    const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === segment);
    if (!pair) return undefined;
    return { value: pair.value, keyOffset: (pair.key as Node).range?.[0] };
  }
  if (isSeq(node)) {
    const item = node.items[Number(segment)];
    return item === undefined ? undefined : { value: item };
  }
  return undefined;
}
