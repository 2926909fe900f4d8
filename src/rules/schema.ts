const factRef = {
  type: 'object',
  additionalProperties: false,
  required: ['fact'],
  properties: { fact: { type: 'string' }, path: { type: 'string' } },
};
const decimalOrRef = { oneOf: [{ type: 'string', pattern: '^[0-9]+(\\.[0-9]+)?$' }, factRef] };
const sequence = { type: 'integer', minimum: 0 };

export const ruleDocumentSchema = {
  $id: 'rule-document',
  type: 'object',
  additionalProperties: false,
  required: ['stage', 'rules'],
  properties: {
    description: { type: 'string' },
    stage: { enum: ['product', 'quote', 'lifecycle', 'buyer', 'refund'] },
    derived_facts: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['name', 'from', 'order_by', 'pick'],
        properties: {
          name: { type: 'string', pattern: '^[a-z][a-z0-9_]*$' },
          from: { type: 'string', minLength: 1 },
          where: {
            type: 'array',
            items: {
              type: 'object',
              additionalProperties: false,
              required: ['field', 'operator', 'param'],
              properties: { field: { type: 'string' }, operator: { type: 'string' }, param: { type: 'string' } },
            },
          },
          order_by: { type: 'string' },
          pick: { enum: ['first', 'last'] },
        },
      },
    },
    rules: { type: 'array', items: { $ref: '#/$defs/rule' } },
  },
  $defs: {
    rule: {
      type: 'object',
      additionalProperties: false,
      required: ['name', 'conditions', 'event'],
      properties: {
        name: { type: 'string', pattern: '^[a-z0-9][a-z0-9.-]*$' },
        description: { type: 'string' },
        conditions: { $ref: '#/$defs/topCondition' },
        event: {
          oneOf: [
            {
              type: 'object',
              additionalProperties: false,
              required: ['type', 'params'],
              properties: {
                type: { const: 'price_line' },
                params: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['sequence', 'code', 'unit', 'quantity'],
                  properties: {
                    sequence,
                    code: { type: 'string' },
                    unit: { type: 'string' },
                    item: { oneOf: [{ type: 'string' }, factRef] },
                    quantity: decimalOrRef,
                    rate_atomic: decimalOrRef,
                    rate: decimalOrRef,
                  },
                },
              },
            },
            {
              type: 'object',
              additionalProperties: false,
              required: ['type', 'params'],
              properties: {
                type: { const: 'refund_line' },
                params: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['sequence', 'code', 'unit', 'quantity', 'direction'],
                  properties: {
                    sequence,
                    code: { type: 'string' },
                    unit: { type: 'string' },
                    item: { oneOf: [{ type: 'string' }, factRef] },
                    quantity: decimalOrRef,
                    rate_atomic: decimalOrRef,
                    rate: decimalOrRef,
                    direction: { enum: ['credit', 'deduct'] },
                  },
                },
              },
            },
            {
              type: 'object',
              additionalProperties: false,
              required: ['type', 'params'],
              properties: {
                type: { const: 'reject' },
                params: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['sequence', 'status', 'code', 'message'],
                  properties: {
                    sequence,
                    status: { enum: [409, 422] },
                    code: { type: 'string', pattern: '^[a-z][a-z0-9_]*$' },
                    message: { type: 'string' },
                    pointer: { type: 'string' },
                  },
                },
              },
            },
            {
              type: 'object',
              additionalProperties: false,
              required: ['type', 'params'],
              properties: {
                type: { const: 'transition' },
                params: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['sequence', 'to', 'reason'],
                  properties: {
                    sequence,
                    to: { enum: ['active', 'suspended', 'expired', 'failed'] },
                    reason: { type: 'string' },
                    actions: {
                      type: 'array',
                      uniqueItems: true,
                      items: { enum: ['disconnect_source', 'disconnect_listeners', 'stop_autodj'] },
                    },
                  },
                },
              },
            },
            {
              type: 'object',
              additionalProperties: false,
              required: ['type', 'params'],
              properties: {
                type: { const: 'enforce' },
                params: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['sequence', 'code', 'reason', 'actions'],
                  properties: {
                    sequence,
                    code: { type: 'string', pattern: '^[a-z][a-z0-9_]*$' },
                    reason: { type: 'string' },
                    actions: {
                      type: 'array',
                      uniqueItems: true,
                      items: { enum: ['disconnect_source', 'disconnect_listeners', 'stop_autodj'] },
                    },
                  },
                },
              },
            },
            {
              type: 'object',
              additionalProperties: false,
              required: ['type', 'params'],
              properties: {
                type: { const: 'not_orderable' },
                params: {
                  type: 'object',
                  additionalProperties: false,
                  required: ['sequence', 'code', 'reason'],
                  properties: {
                    sequence,
                    code: { type: 'string', pattern: '^[a-z][a-z0-9_]*$' },
                    reason: { type: 'string' },
                  },
                },
              },
            },
          ],
        },
      },
    },
    topCondition: {
      oneOf: [
        {
          type: 'object',
          additionalProperties: false,
          required: ['all'],
          properties: { all: { type: 'array', items: { $ref: '#/$defs/condition' } } },
        },
        {
          type: 'object',
          additionalProperties: false,
          required: ['any'],
          properties: { any: { type: 'array', items: { $ref: '#/$defs/condition' } } },
        },
        {
          type: 'object',
          additionalProperties: false,
          required: ['not'],
          properties: { not: { $ref: '#/$defs/condition' } },
        },
      ],
    },
    condition: {
      oneOf: [
        { $ref: '#/$defs/topCondition' },
        {
          type: 'object',
          additionalProperties: false,
          required: ['fact', 'operator', 'value'],
          properties: { fact: { type: 'string' }, path: { type: 'string' }, operator: { type: 'string' }, value: {} },
        },
      ],
    },
  },
};
