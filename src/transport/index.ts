// What the HTTP and MCP transports both use: a JSON body read with the same limits, and the key a client's limits
// are counted against.
export { readJson, readJsonObject } from './json-body.js';
export { limitKey, plainAddress } from './limit-key.js';
