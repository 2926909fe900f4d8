export { nonPublicAddress } from './address-policy.js';
export {
  absoluteUrl,
  hostOf,
  publicHttpOnly,
  policies,
  refusedUrlParameters,
  treatAsPublic,
  type UrlPolicy,
  type Resolver,
} from './url-policy.js';
export { safeGet, checkedLookup, RefusedUrl } from './safe-fetch.js';
