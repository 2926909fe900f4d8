export { PeriodicTask } from './periodic-task.js';
