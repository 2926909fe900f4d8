import { createWriteStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { ApiError } from '../errors/index.js';

/**
 * Writes an upload body to `path`. There is no limit on the total time, so a large file on a slow link arrives;
 * the upload is stopped when no byte arrives for idleTimeoutMs. On a stall the body is left unread (not destroyed),
 * so the client still gets the error document. Resolves with the number of bytes written, exactly expectedBytes.
 */
export function receiveUpload(
  body: Readable,
  path: string,
  options: { expectedBytes: number; idleTimeoutMs: number },
): Promise<number> {
  return new Promise((resolve, reject) => {
    const out = createWriteStream(path, { mode: 0o640 });
    let received = 0;
    let settled = false;
    let timer = setTimeout(stalled, options.idleTimeoutMs);
    const wake = () => {
      clearTimeout(timer);
      timer = setTimeout(stalled, options.idleTimeoutMs);
    };

    function fail(error: Error): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      body.off('data', onData);
      body.pause();
      out.destroy();
      reject(error);
    }
    function stalled(): void {
      const seconds = Math.round(options.idleTimeoutMs / 100) / 10;
      fail(
        new ApiError(
          408,
          'upload_stalled',
          `No bytes of the upload arrived for ${seconds} s, so it was stopped and nothing was kept. Send the whole file again; a slow upload is fine as long as bytes keep arriving.`,
          { retryable: true },
        ),
      );
    }
    function onData(chunk: Buffer): void {
      received += chunk.length;
      wake();
      if (received > options.expectedBytes) {
        fail(
          new ApiError(
            400,
            'upload_too_long',
            `The body is longer than its Content-Length (${options.expectedBytes} bytes). Nothing was kept.`,
          ),
        );
      } else if (!out.write(chunk)) {
        body.pause();
        out.once('drain', () => {
          wake();
          if (!settled) body.resume();
        });
      }
    }

    body.on('data', onData);
    body.once('end', () => {
      if (settled) return;
      clearTimeout(timer);
      if (received !== options.expectedBytes) return fail(incomplete(received, options.expectedBytes));
      out.end();
    });
    body.once('close', () => {
      if (received < options.expectedBytes) fail(incomplete(received, options.expectedBytes));
    });
    body.once('error', (e) => fail(e));
    out.once('error', (e) => fail(e));
    out.once('finish', () => {
      if (settled) return;
      settled = true;
      resolve(received);
    });
  });
}

function incomplete(received: number, expected: number): ApiError {
  return new ApiError(
    400,
    'upload_incomplete',
    `The connection ended after ${received} of ${expected} bytes. Nothing was kept: send the whole file again.`,
    { retryable: true },
  );
}
