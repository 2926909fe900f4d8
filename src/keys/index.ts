export { ApiKeys, KeyRevoked, type ApiKey } from './api-keys.js';
