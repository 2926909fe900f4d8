export { randomId } from './random-id.js';
