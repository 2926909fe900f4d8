export { ApiKeys, KeyRevoked, type ApiKey, type KeyWallet } from './api-keys.js';
