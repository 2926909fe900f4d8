import { randomBytes } from 'node:crypto';

// Random markers, drawn once per process: no catalog or request text can contain them by chance, and none is ever sent.
const markerNonce = randomBytes(12).toString('hex');

/**
 * The JSON text of a value that is the same every time but for a few string fields (an id, a time): serialized once
 * with a marker in each of those fields, then filled by splicing the fields' JSON strings in. A string is written as
 * JSON.stringify writes it wherever it stands (canonicalJson writes strings the same way), so the filled text is
 * byte for byte what serializing the value with those fields would give.
 */
export class TextTemplate<Hole extends string> {
  private constructor(
    private readonly pieces: string[],
    private readonly order: Hole[],
  ) {}

  /**
   * `serialize` gets the markers to put in the holes. Undefined when a marker does not stand exactly once in its text
   * (a hole left out or repeated): such a value is serialized in full each time by the caller.
   */
  static of<Hole extends string>(
    holes: readonly Hole[],
    serialize: (markers: Record<Hole, string>) => string,
  ): TextTemplate<Hole> | undefined {
    const markers = Object.fromEntries(holes.map((hole, i) => [hole, `\u0001${markerNonce}:${i}`])) as Record<
      Hole,
      string
    >;
    const text = serialize(markers);
    const found = holes.map((hole) => {
      const quoted = JSON.stringify(markers[hole]);
      const at = text.indexOf(quoted);
      return at >= 0 && text.indexOf(quoted, at + 1) < 0 ? { hole, at, length: quoted.length } : undefined;
    });
    if (found.some((f) => f === undefined)) return undefined;
    const sorted = (found as { hole: Hole; at: number; length: number }[]).sort((a, b) => a.at - b.at);
    const pieces: string[] = [];
    let from = 0;
    for (const { at, length } of sorted) {
      pieces.push(text.slice(from, at));
      from = at + length;
    }
    pieces.push(text.slice(from));
    return new TextTemplate(
      pieces,
      sorted.map((f) => f.hole),
    );
  }

  /**
   * `serialize` for values that may be serialized again: the first call serializes in full, the second makes the
   * template, and later calls only fill it in. A value serialized once costs what serializing it costs.
   */
  static reused<Hole extends string>(
    holes: readonly Hole[],
    serialize: (fields: Record<Hole, string>) => string,
  ): (fields: Record<Hole, string>) => string {
    let template: TextTemplate<Hole> | undefined;
    let calls = 0;
    return (fields) => {
      calls++;
      if (calls === 2) template = TextTemplate.of(holes, serialize);
      return template ? template.fill(fields) : serialize(fields);
    };
  }

  fill(values: Record<Hole, string>): string {
    let text = this.pieces[0];
    for (let i = 0; i < this.order.length; i++) text += JSON.stringify(values[this.order[i]]) + this.pieces[i + 1];
    return text;
  }
}
