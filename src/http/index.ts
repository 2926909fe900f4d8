export { createApp, API_PREFIX, type AppDeps } from './app.js';
export type { CheckoutStatus } from './discovery-documents.js';
export { healthDetails, type HealthReport } from './discovery.js';
export { ICECAST_CALLBACK_PREFIX } from './icecast-callbacks.js';
export { answerClientErrors } from './client-errors.js';
export type { RateLimits } from './rate-limit.js';
export { ConnectionCap } from './connection-cap.js';
export { limitRequestTime, isUploadRequest } from './request-time-limit.js';
