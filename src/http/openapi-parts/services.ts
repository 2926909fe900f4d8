import {
  CLIENT_CAP_NOTE,
  error,
  idempotencyHeader,
  ok,
  paidResponse,
  paymentRequired,
  paymentSignatureHeader,
  rateLimited,
  ref,
  storeUnavailable,
  unauthorized,
} from './common.js';

const id = {
  name: 'service_id',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[a-zA-Z0-9_-]{8,120}$' },
  description: 'service.service_id from your order.',
};
const name = {
  name: 'name',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9._ ()-]{0,127}$' },
};
// The key it was ordered with, or the wallet that paid for it, signed in (see the Keys tag).
// {}: without credentials the answer is the 402 sign-in challenge, not a refusal.
const owner = { security: [{ agentApiKey: [] }, { siwx: [] }, {}], tags: ['Services'] };
const notFound = error(
  "service_not_found: no such service for this API key or wallet (another buyer's service looks the same as none).",
);
const signIn = {
  description:
    'authentication_required: no credentials were sent. PAYMENT-REQUIRED carries an x402 v2 PaymentRequired with extensions["sign-in-with-x"] (a challenge for this method and path) and an accepts entry that only names the chain (nothing to pay): sign it with the wallet that paid and send the same request again with SIGN-IN-WITH-X, or send your API key.',
  headers: {
    'PAYMENT-REQUIRED': {
      description: 'x402 v2 PaymentRequired (sign-in only), Base64-encoded JSON.',
      schema: { type: 'string' },
    },
  },
  content: { 'application/json': { schema: ref('PaymentRequired') } },
};
const common = { 401: unauthorized, 402: signIn, 404: notFound, 429: rateLimited, 503: storeUnavailable };
const noStorage = error('storage_not_included (the service has no AutoDJ storage) or service_not_active.');

const serviceRecord = {
  get: {
    ...owner,
    operationId: 'getService',
    summary:
      'The service record: status, stream and broadcast URLs, limits, expiry; status_reason when something was enforced.',
    parameters: [id],
    responses: { 200: ok('The service', 'ServiceResponse'), ...common },
  },
};

function upgradePath(paymentInfo: Record<string, unknown>) {
  return {
    post: {
      ...owner,
      operationId: 'upgradeService',
      parameters: [
        id,
        {
          ...idempotencyHeader(true),
          description: 'A new value per upgrade; reuse it when you retry the same upgrade.',
        },
        paymentSignatureHeader,
      ],
      summary:
        'Turn the service into another product for the rest of its paid time (e.g. instant-stream → event-stream), paid with x402 exactly like an order.',
      description: `First call: 402 with PAYMENT-REQUIRED. The price is the target product for the remaining time (its transfer renewed) minus the unused current time, at least the order minimum. Applied without disconnecting the source or listeners; a suspended service becomes active again. ${CLIENT_CAP_NOTE}`,
      'x-payment-info': paymentInfo,
      requestBody: { required: true, content: { 'application/json': { schema: ref('UpgradeRequest') } } },
      responses: {
        200: paidResponse('The order and the upgraded service.'),
        400: error('idempotency_key_missing or malformed, payment_id_invalid.'),
        409: error(
          'upgrade_not_possible, upgrade_changes_nothing, upgrade_in_progress (another upgrade of the ' +
            'service is being paid), service_changed, idempotency_key_reused, payment_id_conflict, ' +
            'payment_already_used. Nothing is charged. Paid but settled after a stop: service_stopped or ' +
            'order_refunded (refunded in full).',
        ),
        422: error('invalid_request: error.details points at the problem.'),
        ...common,
        402: paymentRequired,
        503: error(
          'machine_payment_not_configured, payment_network_unavailable, settlement_pending, ' +
            'provisioning_pending (paid, not provisioned yet: retry the same request; refunded in full if ' +
            'never), store_unavailable (retryable).',
        ),
      },
    },
  };
}

function extendPath(paymentInfo: Record<string, unknown>) {
  return {
    post: {
      ...owner,
      operationId: 'extendService',
      parameters: [
        id,
        {
          ...idempotencyHeader(true),
          description: 'A new value per extension; reuse it when you retry the same extension.',
        },
        paymentSignatureHeader,
      ],
      summary:
        'Add paid hours to the service: its expiry moves from the current expiry (never from now), paid with x402 exactly like an order.',
      description:
        "First call: 402 with PAYMENT-REQUIRED naming the price. The price comes from the product's own pricing: its price for the new total of hours minus its price for the hours already paid " +
        '(a formula product: the added hours at its hourly rate; a package product: the package covering the new total minus the one paid), at least the order minimum and at most the order maximum. ' +
        "The hours over the service's whole life may not pass its product's maximum duration_hours. Applied at once: the source and listeners stay connected past the old expiry. " +
        "An expired service can be extended within the catalog's grace period (24 h unless the catalog says otherwise): it comes back on the same mount with the same credentials. " +
        `service.expiring events name this operation and the price of one more hour; service.extended is sent when it is applied. ${CLIENT_CAP_NOTE}`,
      'x-payment-info': paymentInfo,
      requestBody: { required: true, content: { 'application/json': { schema: ref('ExtendRequest') } } },
      responses: {
        200: paidResponse('The order (extension_of, configuration.duration_hours) and the extended service.'),
        400: error('idempotency_key_missing or malformed, payment_id_invalid.'),
        409: error(
          'service_stopped (it was stopped and refunded), extension_grace_over, extension_too_long (the ' +
            "product's maximum duration), extension_not_possible, amount_out_of_range, extension_in_progress, " +
            'upgrade_in_progress, service_changed, idempotency_key_reused, payment_id_conflict, ' +
            'payment_already_used. Nothing is charged. Paid but settled after a stop: service_stopped or ' +
            'order_refunded (refunded in full).',
        ),
        422: error(
          "invalid_request: error.details points at the problem. extension_too_short: below the product's minimum " +
            'duration_hours (error.details gives it); nothing is charged.',
        ),
        ...common,
        402: paymentRequired,
        503: error(
          'machine_payment_not_configured, payment_network_unavailable, settlement_pending, ' +
            'provisioning_pending (paid, not provisioned yet: retry the same request; refunded in full if ' +
            'never), store_unavailable (retryable).',
        ),
      },
    },
  };
}

/** Stop, usage and the AutoDJ files and playlist. */
const ownerPaths = {
  '/services/{service_id}/stop': {
    post: {
      ...owner,
      operationId: 'stopService',
      parameters: [id],
      summary: 'Stop the service now and get the unused share of what was paid back in USDC.',
      description:
        'The service ends at once (status expired, for good): its mount, source and listeners are cut and its credentials refused. ' +
        'Then the refund is computed (rules/refunds.json: the base fee kept once, every unused paid hour back at the rate it was bought, less the transfer used, nothing below the minimum) ' +
        "and sent to the wallet that paid, from the operator's refund wallet; it is pending until its transfer is proven on chain, then sent with its transaction and a receipt signed with the operator key. " +
        'No body: the destination is never taken from the request. Stopping again returns the same refund and receipt (idempotent_replay true).',
      responses: {
        200: ok('The stopped service, why it ended, and its refund.', 'StopResponse'),
        409: error(
          'service_not_running: the service already ended (expired or failed); there is nothing to stop or refund.',
        ),
        ...common,
      },
    },
  },
  '/services/{service_id}/usage': {
    get: {
      ...owner,
      operationId: 'getServiceUsage',
      parameters: [id],
      summary:
        'What the service used: listeners, listener-hours, bytes, transfer used vs included, source, time remaining, storage, recent life-cycle events.',
      description:
        'Measured from Icecast about once a second; byte counters lag up to ~5 s. With transfer bought, the service is suspended when listeners use more than it.',
      responses: { 200: ok('Usage', 'Usage'), ...common },
    },
  },
  '/services/{service_id}/files': {
    get: {
      ...owner,
      operationId: 'listServiceFiles',
      summary: 'Uploaded AutoDJ files, the playlist and shuffle.',
      parameters: [id],
      responses: { 200: ok('Files', 'Files'), ...common },
    },
  },
  '/services/{service_id}/playlist': {
    put: {
      ...owner,
      operationId: 'setServicePlaylist',
      parameters: [id],
      summary: 'Set the AutoDJ play order (uploaded file names) and shuffle; takes effect at the next track.',
      requestBody: { required: true, content: { 'application/json': { schema: ref('Playlist') } } },
      responses: {
        200: ok('The playlist', 'PlaylistResponse'),
        ...common,
        409: noStorage,
        422: error('unknown_files: a name is not an uploaded file (error.details points at it), or invalid_request.'),
      },
    },
  },
};

/** Uploading and deleting one AutoDJ file; `autoDjOffer` names the products that come with an AutoDJ. */
function filePath(autoDjOffer: string) {
  return {
    put: {
      ...owner,
      operationId: 'uploadServiceFile',
      parameters: [id, name],
      summary: `Upload an audio file for AutoDJ (${autoDjOffer}). The body is the file itself.`,
      description:
        'Send Content-Length: the size is reserved against storage_mb (stored files and uploads in progress count in full) before the body is read; an upload that does not fit is refused with 413 and nothing is kept. Accepted: MP3, AAC (ADTS), M4A, Ogg (Vorbis, Opus), FLAC, WAV, and only if the file decodes to its end; playlists of any kind are refused with 415. At most 2 uploads at once per service (429). There is no total time limit; an upload with no byte for 30 s is stopped (408, retryable). Uploading the same name replaces the file.',
      requestBody: {
        required: true,
        content: {
          'application/octet-stream': { schema: { type: 'string', format: 'binary' } },
          'audio/*': { schema: { type: 'string', format: 'binary' } },
        },
      },
      responses: {
        201: ok('The stored file', 'StoredFile'),
        ...common,
        400: error('upload_incomplete or upload_too_long: the body did not match Content-Length.'),
        408: error('upload_stalled: no byte arrived for the idle timeout (retryable).'),
        409: noStorage,
        411: error('length_required: no Content-Length.'),
        413: error('storage_quota_exceeded: does not fit in the storage bought.'),
        415: error('playlist_not_accepted: a playlist, not audio.'),
        422: error('not_audio, empty_file or invalid_file_name.'),
        429: error('too_many_uploads to this service at once (retryable, Retry-After), rate_limited.'),
        503: error('audio_check_busy: too many uploads being checked on the server (retryable, Retry-After).'),
      },
    },
    delete: {
      ...owner,
      operationId: 'deleteServiceFile',
      summary: 'Delete an uploaded file.',
      parameters: [id, name],
      responses: {
        200: ok('Deleted', 'DeletedFile'),
        ...common,
        404: error('file_not_found or service_not_found.'),
        409: noStorage,
      },
    },
  };
}

/** The Services tag's paths: a service's record, its paid upgrade and extension, stop, usage and AutoDJ files. */
export function servicePaths(paymentInfo: Record<string, unknown>, autoDjOffer: string) {
  return {
    '/services/{service_id}': serviceRecord,
    '/services/{service_id}/upgrade': upgradePath(paymentInfo),
    '/services/{service_id}/extend': extendPath(paymentInfo),
    ...ownerPaths,
    '/services/{service_id}/files/{name}': filePath(autoDjOffer),
  };
}
