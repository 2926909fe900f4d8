/** How the paid operations introduce themselves to x402 discovery (bazaar catalogs, /.well-known/x402). */
export const SERVICE_NAME = 'Agent Audio API';
export const SERVICE_TAGS = ['audio', 'streaming', 'radio', 'icecast', 'infrastructure'];
