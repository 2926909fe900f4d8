export { McpEndpoint } from './endpoint.js';
export { identify, type Caller } from './caller.js';
export type { McpDeps } from './tools.js';
