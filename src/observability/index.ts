export { Metrics, type AnsweredRequest } from './metrics.js';
export { startMetricsServer, type MetricsServer } from './metrics-server.js';
export { clientGone } from './client-gone.js';
