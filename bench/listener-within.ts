import { openListener, type OpenListener } from './streaming.js';

/**
 * A listener GET on `url`; one whose answer does not come within `timeoutMs` counts as refused ("no answer").
 * With `readFrom`, it reads nothing until that promise resolves.
 */
export async function listenWithin(url: string, timeoutMs: number, readFrom?: Promise<void>): Promise<OpenListener> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<OpenListener>((resolve) => {
    timer = setTimeout(() => resolve(noAnswer()), timeoutMs);
  });
  const answer = await Promise.race([openListener(url, readFrom), timeout]);
  clearTimeout(timer);
  return answer;
}

function noAnswer(): OpenListener {
  return {
    status: 0,
    error: 'no answer',
    at: performance.now(),
    bytes: () => 0,
    tail: () => Buffer.alloc(0),
    close: () => undefined,
  };
}
