// ua-parser-js 1.x (MIT) ships no types; this is the part of its API the statistics use.
declare module 'ua-parser-js' {
  export interface UAResult {
    device: { type?: string; vendor?: string; model?: string };
    os: { name?: string; version?: string };
    browser: { name?: string; version?: string };
  }
  export class UAParser {
    constructor(ua?: string);
    getResult(): UAResult;
  }
}
