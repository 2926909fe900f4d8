import { part as events } from './events.js';
import { part as hls } from './hls.js';
import { part as identity } from './identity.js';
import { part as listen } from './listen.js';
import { part as mcp } from './mcp.js';
import { part as recordings } from './recordings.js';
import { part as profile } from './profile.js';
import { part as refundRequests } from './refund-requests.js';
import { part as stats } from './stats.js';
import type { OpenApiPart } from './part.js';

export type { OpenApiPart } from './part.js';

/** Every area's part of the OpenAPI document, merged by ../openapi.ts. Add one import and one entry per part. */
export const openApiParts: OpenApiPart[] = [
  identity,
  events,
  listen,
  mcp,
  hls,
  refundRequests,
  profile,
  stats,
  recordings,
];
