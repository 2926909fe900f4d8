import type { OpenApiPart } from './part.js';

export type { OpenApiPart } from './part.js';

/** Every area's part of the OpenAPI document, merged by ../openapi.ts. Add one import and one entry per part. */
export const openApiParts: OpenApiPart[] = [];
