export { createRequestListener, API_PREFIX, type AppDeps } from './app.js';
export type { CheckoutStatus } from '../operations/discovery-documents.js';
export { healthDetails, type HealthReport } from './discovery.js';
export { ICECAST_CALLBACK_PREFIX, createCallbackListener } from './icecast-callbacks.js';
export { answerClientErrors } from './client-errors.js';
export { answerStarting } from './starting.js';
export type { RateLimits } from './rate-limit.js';
export { ConnectionCap } from './connection-cap.js';
export { limitRequestTime, isUploadRequest } from './request-time-limit.js';
export { asApiError, errorBody } from './error-document.js';
export { objectValidator } from './request-body.js';
export { discoveryDocuments } from '../operations/discovery-documents.js';
export {
  extendRequestSchema,
  idempotencyKeyPattern,
  orderRequestSchema,
  playlistSchema,
  productIdPattern,
  quoteRequestSchema,
  upgradeRequestSchema,
} from './schemas.js';
export { readJson, readJsonObject } from './json-body.js';
export { credentialsOf } from './caller.js';
export { eventRoutes, type EventsApi } from './events.js';
export { SERVICE_NAME, SERVICE_TAGS } from './paid-operations.js';
