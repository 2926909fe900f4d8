import type { ParameterDescriptor } from './types.js';

const isoDuration = '^P(?!$)(\\d+Y)?(\\d+M)?(\\d+W)?(\\d+D)?(T(?=\\d)(\\d+H)?(\\d+M)?(\\d+(\\.\\d+)?S)?)?$';

/**
 * The JSON Schema that a product's parameter descriptors stand for; requests are validated against it with no coercion.
 */
export function parametersSchema(descriptors: Record<string, ParameterDescriptor>): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const [name, d] of Object.entries(descriptors)) properties[name] = descriptorSchema(d);
  const required = Object.entries(descriptors)
    .filter(([, d]) => d.required)
    .map(([name]) => name);
  return { type: 'object', additionalProperties: false, required, properties };
}

export function descriptorSchema(d: ParameterDescriptor): Record<string, unknown> {
  const bounds = {
    ...(d.minimum !== undefined && { minimum: d.minimum }),
    ...(d.maximum !== undefined && { maximum: d.maximum }),
  };
  const annotations = {
    ...(d.default !== undefined && { default: d.default }),
    ...(d.description && { description: d.description }),
  };
  switch (d.type) {
    case 'number':
      return { type: 'number', ...bounds, ...annotations };
    case 'integer':
      return { type: 'integer', ...bounds, ...annotations };
    case 'quantity':
      return { type: 'number', minimum: 0, ...bounds, ...annotations };
    case 'boolean':
      return { type: 'boolean', ...annotations };
    case 'string':
      return { type: 'string', maxLength: 10000, ...annotations };
    case 'url':
      return { type: 'string', format: 'uri', maxLength: 2048, ...annotations };
    case 'duration':
      return { type: 'string', pattern: isoDuration, maxLength: 64, ...annotations };
  }
}
