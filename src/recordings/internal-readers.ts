/** Our own readers of the mounts, as the decider and the meter ask about them. */
export interface OwnReader {
  recognise(request: { user: string; pass: string; userAgent: string }): 'ours' | 'impostor' | undefined;
  isInternalAgent(userAgent: string): boolean;
  /** Bytes our connected readers of `mount` received in this source session. */
  connectedBytes(mount: string): number;
}

/** Several readers as one: the first that knows a request answers for it. */
export function ownReaders(...readers: (OwnReader | undefined)[]): OwnReader {
  const present = readers.filter((r): r is OwnReader => r !== undefined);
  return {
    recognise: (request) => {
      for (const reader of present) {
        const said = reader.recognise(request);
        if (said) return said;
      }
      return undefined;
    },
    isInternalAgent: (agent) => present.some((r) => r.isInternalAgent(agent)),
    connectedBytes: (mount) => present.reduce((sum, r) => sum + r.connectedBytes(mount), 0),
  };
}
