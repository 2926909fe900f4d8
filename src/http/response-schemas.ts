/** Schemas of what the service answers: published in /openapi.json and in the bazaar declarations of paid operations. */

const amountSchema = {
  type: 'object',
  required: ['amount', 'amount_atomic', 'currency', 'decimals'],
  properties: {
    amount: { type: 'string', pattern: '^[0-9]+(?:\\.[0-9]+)?$', description: 'Decimal string, e.g. "2.37".' },
    amount_atomic: { type: 'string', pattern: '^[0-9]+$', description: 'Integer string of atomic units (6 decimals).' },
    currency: { const: 'USDC' },
    decimals: { const: 6 },
  },
};

export const orderSchema = {
  type: 'object',
  required: ['id', 'status', 'product_id', 'billing', 'configuration', 'amount', 'payment', 'created_at'],
  properties: {
    id: { type: 'string', pattern: '^ra_' },
    status: {
      enum: ['settling', 'provisioning', 'active', 'failed', 'refunded'],
      description: 'refunded: paid but not delivered; everything it paid is refunded (see refund).',
    },
    product_id: { type: 'string' },
    billing: { type: 'string' },
    configuration: { type: 'object', description: 'The parameters as provisioned, defaults filled in.' },
    amount: amountSchema,
    quote_id: { type: ['string', 'null'] },
    evaluation_id: {
      type: ['string', 'null'],
      description: 'The audit record that priced this order (agent-audio audit show ID).',
    },
    upgrade_of: { type: 'string', description: 'For an upgrade: the service it changed.' },
    extension_of: {
      type: 'string',
      description:
        'For an extension: the service it added paid time to (configuration.duration_hours: the hours added).',
    },
    payment: {
      type: 'object',
      required: ['protocol', 'network', 'payer'],
      properties: {
        protocol: { const: 'x402' },
        network: { type: 'string' },
        payer: { type: 'string' },
        transaction: { type: ['string', 'null'] },
        block_number: { type: ['string', 'null'] },
      },
    },
    failure: { type: ['string', 'null'] },
    created_at: { type: 'string', format: 'date-time' },
    settled_at: { type: ['string', 'null'], format: 'date-time' },
  },
};

export const serviceSchema = {
  type: 'object',
  required: ['service_id', 'status', 'stream_url', 'limits'],
  properties: {
    service_id: { type: 'string' },
    status: { enum: ['pending', 'provisioning', 'active', 'failed', 'suspended', 'expired'] },
    stream_url: { type: 'string', format: 'uri', description: 'Where listeners connect.' },
    broadcast_url: {
      type: 'string',
      description: 'icecast://user:password@host:port/mount: where your encoder sends the stream.',
    },
    expires_at: { type: 'string', format: 'date-time' },
    limits: { type: 'object', description: 'What was bought: duration, listeners, bitrate, transfer, storage.' },
    endpoints: {
      type: 'object',
      additionalProperties: { type: 'string' },
      description:
        'listen, source_host, source_port, source_mount, encoder_example, service, ' +
        'listen_page (the public listen page), listen_embed (its embeddable player), ' +
        'now_playing_public (their JSON), hls_url (the HLS playlist, GET /hls/{service_id}/index.m3u8), ' +
        'podcast_feed (the RSS feed of its recorded shows).',
    },
  },
};

/** POST /orders and POST /services/{id}/upgrade, paid. */
export const orderResponseSchema = {
  type: 'object',
  required: ['ok', 'order', 'service', 'idempotent_replay'],
  properties: {
    ok: { const: true },
    order: orderSchema,
    service: serviceSchema,
    idempotent_replay: {
      type: 'boolean',
      description: 'True when this is the order an earlier identical request already paid for.',
    },
  },
};

const checkoutSchema = {
  type: 'object',
  required: ['available', 'configured', 'protocol', 'network'],
  properties: {
    available: { type: 'boolean' },
    configured: { type: 'boolean' },
    protocol: { const: 'x402' },
    network: { type: 'string' },
    reason: { type: 'string' },
    buyer_limits: {
      type: 'object',
      description: 'What one API key (per_key) and one paying address (per_payer) may hold at once.',
    },
    capacity_reserve: {
      type: 'object',
      description:
        'Orders that would fill a host beyond newcomer_share of its stream slots or listener places are ' +
        'sold only to a wallet that has paid at least established_payer.minimum_paid USDC (settled, less refunds) ' +
        'at least established_payer.paid_hours_ago hours ago; others get 503 capacity_reserved before paying.',
      properties: {
        newcomer_share: { type: 'number', minimum: 0, maximum: 1 },
        established_payer: {
          type: 'object',
          properties: { minimum_paid: { type: 'string' }, paid_hours_ago: { type: 'number' } },
        },
      },
    },
  },
};

export const healthSchema = {
  type: 'object',
  required: ['ok', 'service', 'version', 'status', 'machine_payment', 'catalog', 'checks', 'links'],
  properties: {
    ok: { const: true },
    service: { type: 'string' },
    version: { type: 'string' },
    status: {
      enum: ['ok', 'degraded'],
      description:
        'degraded: a dependency (database, chain, Icecast) does not answer; orders may fail with retryable errors.',
    },
    provider: { type: 'string' },
    machine_payment: checkoutSchema,
    catalog: {
      type: 'object',
      required: ['catalog_version', 'content_hash'],
      properties: {
        catalog_version: { type: 'integer' },
        content_hash: { type: 'string', pattern: '^sha256:[0-9a-f]{64}$' },
        reload_errors: { type: 'integer' },
      },
    },
    checks: {
      type: 'object',
      additionalProperties: {
        type: 'object',
        required: ['ok'],
        properties: { ok: { type: 'boolean' } },
        additionalProperties: false,
      },
    },
    audit: {
      type: 'object',
      properties: {
        signed_head: { type: ['string', 'null'] },
        key_id: { type: 'string' },
        public_key: { type: 'string' },
        reason: { type: 'string' },
      },
    },
    links: { type: 'object', additionalProperties: { type: 'string' } },
  },
};

export const pricingSchema = {
  type: 'object',
  required: ['ok', 'currency', 'currencies', 'prices'],
  properties: {
    ok: { const: true },
    currency: { type: ['string', 'null'], description: 'The one currency of every price, or null when they differ.' },
    currencies: { type: 'array', items: { type: 'string' } },
    prices: {
      type: 'array',
      items: {
        type: 'object',
        required: ['product_id', 'name', 'status', 'in_preparation', 'currency'],
        properties: {
          product_id: { type: 'string' },
          name: { type: 'string' },
          status: { type: 'string' },
          in_preparation: { type: 'boolean' },
          currency: { type: 'string' },
          basis: { type: 'string' },
          pricing_status: { type: 'string' },
        },
        description:
          "The product's pricing block as in the catalog (amounts in USDC are integer strings of atomic units).",
      },
    },
  },
};

const countSchema = { type: 'object', properties: { total: { type: 'integer' }, free: { type: 'integer' } } };
const roomSchema = { type: 'object', properties: { stream_slots: countSchema, listener_places: countSchema } };
const newcomersRoomSchema = {
  ...roomSchema,
  description:
    'The part a wallet without paid history may fill (agent_checkout.capacity_reserve: that share of each host), ' +
    'and what of it is free.',
};

export const availabilitySchema = {
  type: 'object',
  required: ['ok', 'agent_checkout', 'products'],
  properties: {
    ok: { const: true },
    provider: { type: 'string' },
    region: { type: 'string' },
    human_checkout: { type: 'boolean' },
    agent_checkout: checkoutSchema,
    capacity: {
      type: 'object',
      description:
        'What the live streaming hosts have free now, summed (counted at most a second ago): stream slots and ' +
        'listener places. available_now is false for a product no one host has room for in the asked shape ' +
        '(?listeners=N, else its smallest).',
      properties: {
        ...roomSchema.properties,
        newcomers: newcomersRoomSchema,
        hosts: {
          type: 'array',
          description:
            'Each live streaming host (unnamed) in the order placement tries them: one host serves a whole stream, ' +
            'and a new one goes to the first it fits on. The capacity reserve is checked on that host.',
          items: {
            type: 'object',
            properties: { ...roomSchema.properties, newcomers: newcomersRoomSchema },
          },
        },
        asked_listeners: { type: 'integer' },
      },
    },
    products: {
      type: 'array',
      items: {
        type: 'object',
        required: ['product_id', 'status', 'agent_orderable', 'available_now', 'reason'],
        properties: {
          product_id: { type: 'string' },
          status: { type: 'string' },
          pricing_status: { type: 'string' },
          agent_orderable: { type: 'boolean' },
          available_now: { type: 'boolean' },
          newcomer_available_now: {
            type: 'boolean',
            description:
              'Whether a wallet without paid history can buy it now too (with a capacity reserve): false ' +
              'while only the part kept for established payers has room.',
          },
          pricing: { type: 'object' },
          parameters: { type: 'object' },
          limits: { type: 'object' },
          fulfillment: { type: 'object' },
          reason: { type: 'string', description: 'Why the product can or cannot be ordered now.' },
        },
      },
    },
  },
};

const receiptSchema = {
  oneOf: [
    {
      type: 'object',
      required: ['format', 'signature'],
      properties: { format: { const: 'jws' }, signature: { type: 'string' } },
    },
    { type: 'null' },
  ],
};

/** One transfer of a refund, to one wallet that paid (src/refunds/refund-view.ts). */
const refundTransferSchema = {
  type: 'object',
  required: [
    'id',
    'to',
    'amount',
    'order_ids',
    'status',
    'transaction',
    'pending_reason',
    'waits_for_operator',
    'receipt',
  ],
  properties: {
    id: { type: 'string' },
    to: { type: ['string', 'null'], description: 'The wallet that made these payments, as their Transfer logs say.' },
    amount: { oneOf: [amountSchema, { type: 'null' }] },
    order_ids: {
      type: 'array',
      items: { type: 'string' },
      description: 'The payments (order, upgrades, extensions) this wallet made.',
    },
    status: { enum: ['pending', 'sent', 'failed'] },
    transaction: { type: ['string', 'null'] },
    pending_reason: { type: ['string', 'null'] },
    waits_for_operator: { type: 'boolean' },
    sent_at: { type: ['string', 'null'] },
    receipt: { ...receiptSchema, description: 'Once sent: a JWS signed with the operator key naming this transfer.' },
  },
};

/** A refund as its owner reads it (src/refunds/refund-view.ts). */
export const refundSchema = {
  type: 'object',
  required: [
    'id',
    'reason',
    'status',
    'amount',
    'to',
    'order_ids',
    'transaction',
    'pending_reason',
    'waits_for_operator',
    'receipt',
    'transfers',
  ],
  properties: {
    id: { type: 'string' },
    reason: {
      enum: ['stopped', 'provisioning_failed'],
      description:
        'stopped: the owner stopped the service; provisioning_failed: a paid order could not be delivered (refunded in full).',
    },
    status: {
      enum: ['pending', 'sent', 'failed', 'none'],
      description:
        'pending until its transfer is proven on chain; sent with its transaction; none: nothing to refund (below the minimum).',
    },
    amount: { oneOf: [amountSchema, { type: 'null' }], description: 'null while it is being computed.' },
    to: { type: ['string', 'null'], description: "The wallet that paid, as the payment's own Transfer log names it." },
    order_ids: { type: 'array', items: { type: 'string' } },
    evaluation_id: {
      type: ['string', 'null'],
      description: 'The chained audit record of its evaluation (rules/refunds.json).',
    },
    transaction: { type: ['string', 'null'] },
    pending_reason: { type: ['string', 'null'] },
    waits_for_operator: { type: 'boolean' },
    created_at: { type: 'string' },
    sent_at: { type: ['string', 'null'] },
    receipt: {
      ...receiptSchema,
      description:
        'Once sent: a JWS signed with the operator key (offer-receipt extension format, kind "refund"). ' +
        'Null when the refund goes to several wallets: see transfers.',
    },
    transfers: {
      type: 'array',
      items: refundTransferSchema,
      description:
        'One transfer per wallet that paid for the service (its order, upgrades, extensions): each gets ' +
        'back at most what it paid, latest payment first. to, transaction and receipt are null at the top when ' +
        'there are several.',
    },
  },
};

const endedSchema = {
  type: 'object',
  required: ['reason', 'stopped_at'],
  properties: { reason: { const: 'stopped', description: 'Stopped by its owner.' }, stopped_at: { type: 'string' } },
};

export const stopResponseSchema = {
  type: 'object',
  required: ['ok', 'service', 'ended', 'refund', 'idempotent_replay'],
  properties: {
    ok: { const: true },
    service: serviceSchema,
    ended: endedSchema,
    refund: refundSchema,
    idempotent_replay: { type: 'boolean' },
  },
};

export const orderLookupSchema = {
  type: 'object',
  required: ['ok', 'order', 'service'],
  properties: {
    ok: { const: true },
    order: orderSchema,
    service: { oneOf: [serviceSchema, { type: 'null' }] },
    service_ended: endedSchema,
    refund: {
      ...refundSchema,
      description: 'The latest refund of this order (its service stopped, or it was not delivered).',
    },
    refunds: { type: 'array', items: refundSchema },
  },
};

export const serviceResponseSchema = {
  type: 'object',
  required: ['ok', 'service'],
  properties: {
    ok: { const: true },
    service: serviceSchema,
    status_reason: {
      type: 'string',
      description: 'Why the service is suspended or expired, when something was enforced.',
    },
    evaluation_id: {
      type: ['string', 'null'],
      description: 'The audit record that priced the service now (its order or latest upgrade).',
    },
    evaluations: {
      type: 'array',
      items: {
        type: 'object',
        properties: { order_id: { type: 'string' }, evaluation_id: { type: ['string', 'null'] } },
      },
    },
  },
};

export const listenerAggregatesSchema = {
  type: 'object',
  required: ['sessions', 'average_session_seconds', 'listener_hours_by_hour'],
  properties: {
    sessions: { type: 'integer' },
    average_session_seconds: { type: ['number', 'null'] },
    listener_hours_by_hour: {
      type: 'array',
      minItems: 24,
      maxItems: 24,
      items: { type: 'string' },
      description: 'Listener-hours per hour of the day, UTC, index 0 = 00:00–01:00.',
    },
  },
};

export const usageResponseSchema = {
  type: 'object',
  required: ['ok', 'usage'],
  properties: {
    ok: { const: true },
    usage: {
      type: 'object',
      required: [
        'service_id',
        'status',
        'listeners',
        'listener_hours',
        'bytes',
        'transfer',
        'source',
        'time',
        'events',
      ],
      properties: {
        service_id: { type: 'string' },
        status: serviceSchema.properties.status,
        status_reason: { type: ['string', 'null'] },
        listeners: {
          type: 'object',
          properties: { current: { type: 'number' }, peak: { type: 'number' }, admitted_now: { type: 'number' } },
        },
        listener_hours: { type: ['string', 'number'] },
        stats_url: { type: 'string', description: 'GET it: listener statistics per day (also as CSV).' },
        listener_sessions: {
          ...listenerAggregatesSchema,
          description:
            'Listener sessions (GET /services/{service_id}/listeners): count, average length, ' +
            'listener-hours by hour of day.',
        },
        bytes: {
          type: 'object',
          properties: {
            sent_to_listeners: {
              type: ['number', 'string'],
              description:
                "Exact for listeners who left (the proxy's count of what it sent them); for those connected, what " +
                'Icecast wrote for them, so a leaving can lower it by what was still in the proxy.',
            },
            read_from_source: { type: ['number', 'string'] },
          },
        },
        transfer: {
          type: 'object',
          properties: {
            used_gb: { type: ['string', 'number'] },
            included_gb: { type: 'string' },
            policy: { type: 'string' },
            note: { type: 'string' },
          },
        },
        source: {
          type: 'object',
          properties: {
            connected: { type: 'boolean' },
            since: { type: ['string', 'null'] },
            measured_kbps: { type: ['number', 'null'] },
            bought_kbps: { type: ['number', 'null'] },
            bitrate_budget: { type: 'object' },
          },
        },
        time: {
          type: 'object',
          properties: { expires_at: { type: ['string', 'null'] }, remaining_seconds: { type: ['integer', 'null'] } },
        },
        storage: { type: 'object', properties: { used_mb: { type: 'number' }, bought_mb: { type: 'number' } } },
        recording_storage: {
          type: 'object',
          description: 'Where the product records: the storage for recordings, and what they take.',
          required: ['included_mb', 'recording_storage_gb', 'bought_bytes', 'used_bytes', 'recordings'],
          properties: {
            included_mb: { type: 'number', description: "The product's limits.recording_storage_mb." },
            recording_storage_gb: { type: 'number', description: 'Bought on top with the order (0: none).' },
            bought_bytes: { type: 'integer', description: 'Included and bought together.' },
            used_bytes: { type: 'integer' },
            recordings: { type: 'integer' },
          },
        },
        measured_at: { type: ['string', 'null'] },
        events: {
          type: 'array',
          items: { type: 'object' },
          description: 'The latest life-cycle events (status changes, enforcement), newest first.',
        },
        ended: { ...endedSchema, description: 'When the service was stopped by its owner.' },
        refund: refundSchema,
      },
    },
  },
};

const fileSchema = {
  type: 'object',
  required: ['name', 'size_bytes', 'format'],
  properties: {
    name: { type: 'string' },
    size_bytes: { type: 'number' },
    format: { type: 'string' },
    duration_seconds: { type: ['number', 'null'] },
    artist: { type: ['string', 'null'] },
    title: { type: ['string', 'null'] },
    created_at: { type: 'string', format: 'date-time' },
  },
};

export const filesResponseSchema = {
  type: 'object',
  required: ['ok', 'files', 'playlist'],
  properties: {
    ok: { const: true },
    files: { type: 'array', items: fileSchema },
    playlist: { type: 'array', items: { type: 'string' } },
    shuffle: { type: ['boolean', 'null'] },
  },
};

export const storedFileResponseSchema = {
  type: 'object',
  required: ['ok', 'file'],
  properties: { ok: { const: true }, file: fileSchema },
};
export const deletedFileResponseSchema = {
  type: 'object',
  required: ['ok', 'deleted'],
  properties: { ok: { const: true }, deleted: { type: 'string' } },
};
export const playlistResponseSchema = {
  type: 'object',
  required: ['ok', 'playlist'],
  properties: {
    ok: { const: true },
    playlist: { type: 'array', items: { type: 'string' } },
    shuffle: { type: 'boolean' },
  },
};

export const auditHeadSchema = {
  type: 'object',
  required: ['ok', 'signed_head', 'key_id', 'public_key'],
  properties: {
    ok: { const: true },
    signed_head: {
      type: 'object',
      description:
        'The chain head as a checkpoint (type agent-audio.audit-checkpoint/1, chain hash, time, key id; no record count) and its Ed25519 signature.',
    },
    key_id: { type: 'string' },
    public_key: { type: 'string', description: "The operator's public key, PEM." },
    note: { type: 'string' },
  },
};

export const wellKnownX402Schema = {
  type: 'object',
  required: ['x402Version', 'items'],
  properties: {
    x402Version: { const: 2 },
    lastUpdated: { type: 'integer' },
    items: {
      type: 'array',
      items: {
        type: 'object',
        required: ['resource', 'type', 'accepts', 'input'],
        properties: {
          resource: {
            type: 'object',
            required: ['url'],
            properties: {
              url: { type: 'string' },
              description: { type: 'string' },
              serviceName: { type: 'string' },
              tags: { type: 'array', items: { type: 'string' } },
            },
          },
          type: { const: 'http' },
          accepts: { type: 'array', items: { type: 'object' } },
          priceRange: { type: 'object' },
          input: {
            type: 'object',
            required: ['method', 'routeTemplate'],
            properties: { method: { type: 'string' }, routeTemplate: { type: 'string' } },
          },
          output: { type: 'object' },
          requires: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
};

/** One x402 v2 PaymentRequirements, as in PAYMENT-REQUIRED's `accepts`. */
export const paymentRequirementsSchema = {
  type: 'object',
  required: ['scheme', 'network', 'asset', 'amount', 'payTo', 'maxTimeoutSeconds'],
  properties: {
    scheme: { type: 'string', description: 'e.g. "exact".' },
    network: { type: 'string', description: 'CAIP-2 network id, e.g. "eip155:8453" (Base).' },
    asset: { type: 'string', description: 'The token contract (USDC).' },
    amount: { type: 'string', pattern: '^[0-9]+$', description: 'Atomic units (6 decimals).' },
    payTo: { type: 'string' },
    maxTimeoutSeconds: { type: 'integer' },
    extra: { type: 'object', additionalProperties: true },
  },
};

/**
 * A 402's body: the error document plus `x402Version` and `accepts` of its PAYMENT-REQUIRED header (x402 v1 clients
 * read them from the body; v2 clients read the header).
 */
export function paymentRequiredBodySchema(
  error: Record<string, unknown> & { required: string[]; properties: Record<string, unknown> },
) {
  return {
    ...error,
    required: [...error.required, 'x402Version', 'accepts'],
    properties: {
      ...error.properties,
      x402Version: {
        const: 2,
        description: 'x402 v2: the payment terms are in the PAYMENT-REQUIRED header; x402 v1 clients cannot pay them.',
      },
      accepts: {
        type: 'array',
        items: { $ref: '#/components/schemas/PaymentRequirements' },
        description: "The PAYMENT-REQUIRED header's accepts (empty for a sign-in challenge).",
      },
    },
  };
}
