export { jsonLogger, type Logger, type Fields } from './logger.js';
