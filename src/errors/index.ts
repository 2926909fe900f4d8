export { ApiError } from './api-error.js';
export { asApiError, errorBody } from './error-document.js';
