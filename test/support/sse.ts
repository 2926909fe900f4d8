/** One Server-Sent Event as a client sees it. */
export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Opens an SSE stream with fetch and collects its events (and comment lines) until closed. */
export async function openSse(url: string, headers: Record<string, string>) {
  const controller = new AbortController();
  const response = await fetch(url, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: controller.signal,
  });
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  let ended = false;
  let endedCleanly = false;
  const reading = (async () => {
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const message: SseMessage = { data: '' };
          let isEvent = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) {
              message.id = line.slice(4);
              isEvent = true;
            } else if (line.startsWith('event: ')) {
              message.event = line.slice(7);
              isEvent = true;
            } else if (line.startsWith('data: ')) {
              message.data += line.slice(6);
              isEvent = true;
            }
          }
          if (isEvent) messages.push(message);
        }
      }
      endedCleanly = true;
    } catch {
      /* aborted, or the connection was cut */
    }
    ended = true;
  })();
  return {
    status: response.status,
    contentType: response.headers.get('content-type'),
    messages,
    comments,
    ended: () => ended,
    /** The server ended the response properly (not a cut connection, not our abort). */
    endedCleanly: () => endedCleanly,
    reading,
    close: () => controller.abort(),
  };
}
