export { flatLineLogger, jsonLogger, type Logger, type Fields, type LogFormat, type LogOptions } from './logger.js';
