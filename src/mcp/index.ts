export { McpEndpoint } from './endpoint.js';
export { identify, type Caller } from './caller.js';
export type { McpDeps } from './tools.js';
export { listTools } from './server.js';
export { publishedSchemas as toolInputSchemas, type ToolName } from './tool-schemas.js';
export { toolResourceUrl } from './x402-binding.js';
