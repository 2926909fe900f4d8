export { BatchedCalls } from './batched-calls.js';
export { Database, timedOut, type Client, type Row } from './database.js';
export { migrate } from './migrate.js';
export { startEmbeddedPostgres, allowTraversal, type RunningPostgres } from './embedded-postgres.js';
export { freePort } from './free-port.js';
export { ChannelListener } from './channel-listener.js';
