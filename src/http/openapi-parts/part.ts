/**
 * One area's share of /openapi.json: OpenAPI 3.1 path items (paths relative to /api/v1) and the component schemas
 * they reference. Each area that adds HTTP routes describes them in its own file here and is listed in index.ts.
 */
export interface OpenApiPart {
  tags?: { name: string; description: string }[];
  paths: Record<string, unknown>;
  schemas: Record<string, unknown>;
  /** Security schemes the part's operations name, merged into components.securitySchemes. */
  securitySchemes?: Record<string, unknown>;
}
