export { flatLineLogger, jsonLogger, logOptionsFromEnv, type Logger, type Fields, type LogFormat, type LogOptions } from './logger.js';
