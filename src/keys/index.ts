export { ApiKeys, type ApiKey } from './api-keys.js';
