export { QuoteService, type QuoteRequest, type QuoteResult } from './quote-service.js';
