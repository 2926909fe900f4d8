export { ApiError } from './api-error.js';
